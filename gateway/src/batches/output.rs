//! `finalizing`: the batch's answers written as files in OpenAI's format, one line per request in input
//! order: 2xx answers to the output file, error answers and lines never run (expired, cancelled) to the
//! error file. Each answer is the body the endpoint gave, byte for byte (its exact `cost` included).

use serde::Serialize;
use serde_json::json;
use serde_json::value::RawValue;

use crate::db::batches::{self as rows, BatchRow, Finished, Lease};
use crate::error::ApiError;
use crate::files;
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

/// Writes the files of the batch `lease` holds and ends it: `cancelled` when it was cancelled, `expired`
/// when lines expired unrun, `completed` otherwise.
///
/// A try that fails leaves the batch `finalizing` for another (the runner gives its lease back). Each try
/// first deletes the files an earlier one finished, and writes both files whole: the batch ends with one
/// output and one error file whatever number of tries it took. Nothing here bills: each line's cost
/// record was written once, when it ran.
///
/// # Errors
/// Database or storage errors.
pub async fn finalize(state: &AppState, lease: &Lease) -> Result<(), ApiError> {
    let id = lease.id.as_str();
    let Some(batch) = rows::get(&state.db, None, id).await? else {
        return Ok(());
    };
    // The batch is still finalizing: any file of these names is an earlier try's, never delivered.
    let names = [file_name(id, true), file_name(id, false)];
    let stale = files::discard_batch_output(state, batch.tenant_id, &names).await?;
    if stale > 0 {
        tracing::info!(batch = %id, files = stale, "the files of an earlier try to finalize the batch deleted");
    }
    let (status, output_id, error_id) = write(state, &batch).await?;
    let ended = rows::finish(&state.db, lease, status, output_id.as_deref(), error_id.as_deref()).await;
    if !matches!(ended, Ok(true)) {
        // Files no batch names: this try's alone to delete (a later try deletes what is left here).
        for file in output_id.iter().chain(&error_id) {
            if let Err(e) = files::discard(state, batch.tenant_id, file).await {
                tracing::warn!(batch = %id, file = %file, error = ?e, "a file of a failed try to finalize the batch not deleted yet");
            }
        }
    }
    if !ended? {
        tracing::warn!(batch = %id, "the batch's lease passed to another replica before this one finalized it; its files here deleted");
    }
    Ok(())
}

fn file_name(batch: &str, output: bool) -> String {
    format!("{batch}_{}.jsonl", if output { "output" } else { "error" })
}

/// Writes the batch's output and error files (each only when it has a line): the status the batch ends
/// in and the files' ids.
async fn write(state: &AppState, batch: &BatchRow) -> Result<(&'static str, Option<String>, Option<String>), ApiError> {
    let id = batch.id.as_str();
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
                *file = Some(Writer::begin(state, batch.tenant_id, &file_name(id, to_output), i64::MAX).await?);
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
    Ok((status, output_id, error_id))
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
