//! `finalizing`: the batch's answers written as files in OpenAI's format, one line per request in input
//! order: 2xx answers to the output file, error answers and lines never run (expired, cancelled) to the
//! error file. Each answer is the body the endpoint gave, byte for byte (its exact `cost` included).

use serde::Serialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::db::batches::{self as rows, Finished};
use crate::error::ApiError;
use crate::files::writer::Writer;
use crate::files::DEFAULT_EXPIRY_S;
use crate::state::AppState;

const PAGE: i64 = 1000;

#[derive(Serialize)]
struct OutputLine<'a> {
    id: String,
    custom_id: &'a str,
    response: Option<Answer<'a>>,
    error: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct Answer<'a> {
    status_code: i32,
    request_id: &'a str,
    body: Box<RawValue>,
}

/// Writes batch `id`'s files and ends it: `cancelled` when it was cancelled, `expired` when lines expired
/// unrun, `completed` otherwise.
///
/// # Errors
/// Database or storage errors (the batch stays `finalizing`, for a later try).
pub async fn finalize(state: &AppState, id: &str) -> Result<(), ApiError> {
    let Some(batch) = rows::get(&state.db, None, id).await? else {
        return Ok(());
    };
    let (mut output, mut errors): (Option<Writer>, Option<Writer>) = (None, None);
    let (mut after, mut expired) = (-1, false);
    loop {
        let page = rows::lines(&state.db, id, after, PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.line;
        for line in &page {
            expired |= line.state == "expired";
            let (text, to_output) = render(id, line);
            let file = if to_output { &mut output } else { &mut errors };
            if file.is_none() {
                let name = format!("{id}_{}.jsonl", if to_output { "output" } else { "error" });
                *file = Some(Writer::begin(state, batch.tenant_id, &name, i64::MAX).await?);
            }
            if let Some(writer) = file.as_mut() {
                writer.write(text.as_bytes()).await?;
            }
        }
    }
    let status = if batch.cancelling_at.is_some() {
        "cancelled"
    } else if expired {
        "expired"
    } else {
        "completed"
    };
    let output_id = match output {
        Some(writer) => Some(writer.finish("batch_output", None, DEFAULT_EXPIRY_S).await?.id),
        None => None,
    };
    let error_id = match errors {
        Some(writer) => Some(writer.finish("batch_output", None, DEFAULT_EXPIRY_S).await?.id),
        None => None,
    };
    rows::finish(&state.db, id, status, output_id.as_deref(), error_id.as_deref()).await?;
    Ok(())
}

/// A line of the output (`true`) or error file, with its newline.
fn render(batch: &str, line: &Finished) -> (String, bool) {
    let id = format!("batch_req_{}_{}", batch.trim_start_matches("batch_"), line.line);
    let answer = match (line.status_code, &line.response) {
        (Some(status_code), Some(text)) => {
            let body = RawValue::from_string(text.clone())
                .unwrap_or_else(|_| RawValue::from_string(json!(text).to_string()).unwrap_or_else(|_| RawValue::NULL.to_owned()));
            Some(Answer { status_code, request_id: &line.request_id, body })
        }
        _ => None,
    };
    let error = match line.state.as_str() {
        "expired" => {
            Some(json!({"code": "batch_expired", "message": "This request could not be run before the batch's completion window ended."}))
        }
        "cancelled" => Some(json!({"code": "batch_cancelled", "message": "This request was not run: the batch was cancelled."})),
        _ => None,
    };
    let to_output = line.state == "succeeded";
    let text = serde_json::to_string(&OutputLine { id, custom_id: &line.custom_id, response: answer, error }).unwrap_or_default();
    (text + "\n", to_output)
}
