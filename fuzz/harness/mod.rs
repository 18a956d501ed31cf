//! The invariants the `cargo fuzz` targets in `fuzz/` check on each input: one function per target,
//! taking the fuzzer's raw bytes and panicking (an `assert!`) when an invariant breaks. Bytes that are
//! not JSON are skipped: the gateway refuses them (400 `invalid_json`) before any of this runs.
//!
//! One source module, compiled twice and shipped in neither binary: into each `fuzz_targets/*.rs`
//! (`#[path]`), and into `gateway/tests/fuzz_corpus.rs`, which replays the committed corpus in the main
//! workspace's `cargo test`, so the harness is compiled, linted and run with the code it exercises
//! without living in the production crate. It uses only the gateway's public API and does no I/O.
//!
//! `schema` owns the schema checks, `dialects` the request translations; both end in [`chat_pipeline`],
//! what `inference::prepare` does with a chat body before it needs the database.

mod dialects;
mod schema;

use runaii_wire::ChatCompletionRequest;
use rust_decimal::Decimal;
use serde_json::{json, Value};

use runaii_gateway::billing::{worst_case_cost, worst_case_tokens};
use runaii_gateway::db::models::ModelRow;
use runaii_gateway::error::ApiError;
use runaii_gateway::structured;

pub use dialects::{chat, messages, responses};
pub use schema::schema;

/// The context window every check assumes (SmolLM2's is 8192; smaller finds unreachable minimums sooner).
const CONTEXT: i32 = 4096;

/// Tokio's default worker stack. The gateway (`#[tokio::main]`) runs every check below on one, so a
/// schema or body nested deeply enough to overflow it would kill the process, not just the request.
const WORKER_STACK_BYTES: usize = 2 * 1024 * 1024;

/// Parses `data` as the gateway does and runs `check` on it on a stack the size of a worker's.
fn with_json(data: &[u8], check: impl FnOnce(&Value) + Send) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().stack_size(WORKER_STACK_BYTES).spawn_scoped(scope, || check(&value));
        assert!(spawned.is_ok(), "cannot start a checking thread");
        if let Ok(handle) = spawned {
            if let Err(panic) = handle.join() {
                // The panic's own message was printed by the hook; the fuzzer needs it in this thread.
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// A refusal of the client's input: a 400 with a message (never a 5xx, never an empty explanation).
fn assert_refusal(error: &ApiError) {
    assert_eq!(error.status(), 400, "refused with {}: {error}", error.status());
    assert!(!error.body().error.message.is_empty(), "a refusal without a message: {error:?}");
}

/// What `completions::prepare` does with a chat body (as sent, or as a dialect translated it) before it
/// needs the database: parse it, check its schemas, add the schema prompt, ask for usage when streamed,
/// bound its cost. Whatever survives is what goes to a worker, and it must still be a chat request.
fn chat_pipeline(mut body: Value) {
    let Ok(request) = serde_json::from_value::<ChatCompletionRequest>(body.clone()) else { return };
    if let Err((error, reason)) = structured::check_request_schemas(&body, CONTEXT) {
        assert_refusal(&error);
        assert!(matches!(reason, "schema_too_complex" | "invalid_response_format"), "metric reason {reason}");
        return;
    }
    let schema_prompt = structured::json_schema_of(body.get("response_format")).cloned();
    if let (Some(schema), Some(messages)) = (schema_prompt, body.get_mut("messages")) {
        let before = messages.as_array().map_or(0, Vec::len);
        structured::add_schema_prompt(messages, &schema);
        let after = messages.as_array().map_or(0, Vec::len);
        assert!(after == before || after == before + 1, "the schema prompt took {before} messages to {after}");
        assert!(matches!(messages[0]["role"].as_str(), Some("system" | "developer")), "no system message first: {messages}");
    }
    if request.stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    let model = model();
    let (prompt, output) = worst_case_tokens(&model, &body);
    assert!(
        i64::from(prompt) <= i64::from(CONTEXT) && i64::from(output) <= i64::from(CONTEXT),
        "worst case beyond the context: {prompt}, {output}"
    );
    assert!(worst_case_cost(&model, &body) >= Decimal::ZERO);
    let sent = serde_json::to_vec(&body);
    assert!(
        sent.as_ref().is_ok_and(|s| serde_json::from_slice::<ChatCompletionRequest>(s).is_ok()),
        "the gateway would forward a body that is no chat request: {body}"
    );
}

/// A catalog row at the highest price the admin API takes in practice.
fn model() -> ModelRow {
    ModelRow {
        id: "m".into(),
        owned_by: "runaii".into(),
        context_length: CONTEXT,
        input_price_per_mtok: Decimal::new(1_000_000, 2),
        cached_input_price_per_mtok: Decimal::new(1_000_000, 2),
        output_price_per_mtok: Decimal::new(1_000_000, 2),
        batch_price_ratio: Decimal::ONE,
        supports_structured_outputs: true,
        supports_tools: true,
        schema_in_prompt: true,
        public: true,
        created_at: chrono::DateTime::UNIX_EPOCH,
    }
}
