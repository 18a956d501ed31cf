//! `validating`: the batch's input read into lines, each checked against the batch: its `url` is the
//! batch's endpoint, its model one the tenant may use, and it asks for a whole answer (no `stream`, no
//! `background`). The tokens its lines may use (each line's prompt bound and `max_tokens`) are the
//! batch's enqueued tokens, its own rate-limit pool: a tenant's unfinished batches hold at most
//! `--batch-max-enqueued-tokens`, and a batch that would pass it fails `token_limit_exceeded`. What the endpoint itself would refuse (a bad schema, an unknown parameter) is that
//! line's own 400 in the error file, uncharged, as it would be online.

use futures::StreamExt as _;
use serde_json::{json, Value};

use crate::billing::worst_case_tokens;
use crate::db::batches::{self as rows, NewLine, Start};
use crate::error::ApiError;
use crate::files::batch_input::InputLine;
use crate::state::AppState;

/// The most errors a failed batch lists (OpenAI lists the first few too).
const MAX_ERRORS: usize = 100;

/// Validates batch `id`: `in_progress` with its lines, or `failed` with the reasons.
///
/// # Errors
/// Database or storage errors (the batch stays `validating`, for a later try).
pub async fn validate(state: &AppState, id: &str) -> Result<(), ApiError> {
    let Some(batch) = rows::get(&state.db, None, id).await? else {
        return Ok(());
    };
    let Some(file) = crate::db::files::get(&state.db, batch.tenant_id, &batch.input_file_id).await? else {
        let error = error_object(vec![
            json!({"code": "invalid_file", "message": "the input file no longer exists", "param": "input_file_id", "line": null}),
        ]);
        return Ok(rows::fail(&state.db, id, &error).await?);
    };
    let mut bytes = Vec::with_capacity(usize::try_from(file.bytes).unwrap_or(0));
    let mut parts = state.files.read(&file.id, file.parts);
    while let Some(part) = parts.next().await {
        bytes.extend_from_slice(&part.map_err(crate::files::storage_error)?);
    }
    let (mut lines, mut errors) = (Vec::new(), Vec::new());
    for (n, text) in bytes.split(|b| *b == b'\n').enumerate() {
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let line = n + 1;
        match check(state, &batch.endpoint, batch.tenant_id, text) {
            Ok(new) => lines.push(new),
            Err((code, message, param)) => {
                if errors.len() < MAX_ERRORS {
                    errors.push(json!({"code": code, "message": message, "param": param, "line": line}));
                }
            }
        }
    }
    if !errors.is_empty() {
        return Ok(rows::fail(&state.db, id, &error_object(errors)).await?);
    }
    let enqueued: i64 = lines.iter().map(|l| l.tokens).sum();
    let max = state.settings.batches.max_enqueued_tokens;
    if let Start::OverLimit(held) = rows::start(&state.db, (id, batch.tenant_id), &lines, (enqueued, max)).await? {
        let message = format!(
            "This batch may use up to {enqueued} tokens and your unfinished batches hold {held} of the {max} a tenant may have enqueued; \
             submit it again when some have finished."
        );
        let error = error_object(vec![json!({"code": "token_limit_exceeded", "message": message, "param": null, "line": null})]);
        rows::fail(&state.db, id, &error).await?;
    }
    Ok(())
}

fn error_object(data: Vec<Value>) -> Value {
    json!({"object": "list", "data": data})
}

/// One line as the batch runs it, or (code, message, param) saying why it cannot be.
fn check(state: &AppState, endpoint: &str, tenant: uuid::Uuid, text: &[u8]) -> Result<NewLine, (&'static str, String, &'static str)> {
    let line = InputLine::parse(text).map_err(|why| ("invalid_request", why, "body"))?;
    if line.url != endpoint {
        return Err(("mismatched_url", format!("the line's url is {}, the batch's endpoint {endpoint}", line.url), "url"));
    }
    let model =
        line.body.get("model").and_then(Value::as_str).ok_or(("invalid_request", "the body has no model".to_owned(), "body.model"))?;
    let Some(model_row) = state.catalog.find_visible(model, Some(tenant)) else {
        return Err(("model_not_found", format!("The model `{model}` does not exist or you do not have access to it."), "body.model"));
    };
    for field in ["stream", "background"] {
        if line.body.get(field).and_then(Value::as_bool) == Some(true) {
            return Err(("invalid_request", format!("a batch line is answered whole: `{field}: true` is not allowed"), "body"));
        }
    }
    let request_id = super::new_request_id(endpoint);
    let body = Value::Object(line.body);
    let (prompt, output) = worst_case_tokens(&model_row, &body);
    Ok(NewLine { custom_id: line.custom_id, request_id, tokens: i64::from(prompt) + i64::from(output), body })
}
