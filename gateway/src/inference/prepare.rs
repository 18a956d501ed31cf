//! Checking a chat request (as sent, or as a dialect translated it) before anything is forwarded:
//! parse it, resolve its model, check its schemas, show the model the schema, ask the worker for usage,
//! and hold the worst-case cost. From the hold on, every outcome has a cost record.

use std::sync::Arc;

use runaii_wire::priority::Priority;
use runaii_wire::ChatCompletionRequest;
use rust_decimal::Decimal;
use serde::Deserialize as _;
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::billing::leases::Held;
use crate::billing::{worst_case_cost, Ledger};
use crate::db::credits;
use crate::db::models::ModelRow;
use crate::error::ApiError;
use crate::state::AppState;
use crate::structured;

/// A checked chat request, ready to send, with the ledger that will record it.
#[derive(Debug)]
pub struct Prepared {
    pub ledger: Ledger,
    pub body: Value,
    pub stream: bool,
    pub include_usage: bool,
}

/// Checks a chat request body, resolves its model and adds the schema prompt.
///
/// # Errors
/// 400 for a malformed body or `response_format`, 404 for an unknown model.
pub async fn prepare(
    state: &AppState,
    caller: Caller,
    mut body: Value,
    endpoint: &'static str,
    request_id: String,
) -> Result<Prepared, ApiError> {
    // Read from the tree in place: no copy of the body.
    let request = ChatCompletionRequest::deserialize(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let model = state.catalog.find_visible(&request.model, Some(caller.tenant_id)).ok_or(ApiError::ModelNotFound(request.model.clone()))?;
    // A batch line is held, recorded and answered at the batch price.
    let model = match caller.priority {
        Priority::Online => model,
        Priority::Batch => model.at_batch_price(),
    };
    if let Err((error, reason)) = structured::check_request_schemas(&body, model.context_length) {
        crate::metrics::global().schema_refusals.add(&[reason], 1);
        return Err(error);
    }
    if model.schema_in_prompt {
        if let Some(schema) = structured::json_schema_of(body.get("response_format")).cloned() {
            if let Some(messages) = body.get_mut("messages") {
                structured::add_schema_prompt(messages, &schema);
            }
        }
    }
    if request.stream {
        // The gateway always needs the usage to bill; the client gets it only if it asked.
        body["stream_options"] = json!({"include_usage": true});
    }
    state.spend_caps.check(caller.tenant_id, caller.monthly_spend_cap).await?;
    let held = hold_worst_case(state, &caller, &model, &body, &request_id).await?;
    // From here every outcome has a cost record under this id: whatever answer goes out names it.
    let ledger = Ledger {
        writer: state.ledger.clone(),
        request_id,
        caller,
        model,
        endpoint,
        started: crate::metrics::arrived(),
        limiter: Arc::clone(&state.limiter),
        tasks: state.tasks.clone(),
        held,
        leases: Arc::clone(&state.leases),
        replica: state.replica_id,
    };
    Ok(Prepared { ledger, body, stream: request.stream, include_usage: request.include_usage() })
}

/// Holds the request's worst-case cost from the tenant's credit: against this replica's lease when it
/// has room (no round trip), else with a hold of its own. The ledger settles it when the request ends;
/// from here on every outcome is recorded, which releases the hold.
///
/// # Errors
/// 402 `insufficient_credits` when the tenant cannot cover the worst case; nothing is charged.
async fn hold_worst_case(state: &AppState, caller: &Caller, model: &ModelRow, body: &Value, request_id: &str) -> Result<Held, ApiError> {
    let worst = worst_case_cost(model, body);
    let holds = &crate::metrics::global().credit_holds;
    if let Some(held) = state.leases.try_hold(caller.tenant_id, worst) {
        holds.add(&["lease"], 1);
        return Ok(held);
    }
    if credits::hold(&state.db, caller.tenant_id, request_id, worst, state.replica_id).await? {
        holds.add(&["exact"], 1);
        return Ok(Held::Exact);
    }
    let available = credits::balance(&state.db, caller.tenant_id).await?.map_or(Decimal::ZERO, |b| b.available());
    Err(ApiError::InsufficientCredits { needed: worst.normalize().to_string(), available: available.normalize().to_string() })
}
