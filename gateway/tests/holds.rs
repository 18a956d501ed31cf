//! Credit holds are real bounds, and a record is never dropped: the worst case held at admission covers
//! what the real worker counts for prompts that render longer than their JSON (tool descriptions that
//! `tojson` escapes, many messages, tool-call arguments written back as JSON); and when a cost exceeds its
//! hold anyway, it is recorded with the shortfall visible to finance instead of being lost.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{admin_token, spawn_app, MODEL};
use reqwest::Method;
use runaii_gateway::billing::{worst_case_cost, worst_case_tokens};
use runaii_gateway::db::costs;
use rust_decimal::Decimal;
use serde_json::{json, Value};

fn tool(description: &str) -> Value {
    json!({"type": "function", "function": {"name": "lookup", "description": description,
           "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}})
}

/// Sends `body`, then checks the real worker's prompt count and the record's cost against the bound the
/// gateway held for exactly that body.
async fn assert_within_hold(app: &common::TestApp, what: &str, body: &Value) {
    let model = runaii_gateway::db::models::list_enabled(&app.db).await.unwrap().into_iter().find(|m| m.id == MODEL).unwrap();
    let (prompt_bound, _) = worst_case_tokens(&model, body);
    let (status, answer, _) = app.post_json("/v1/chat/completions", body).await;
    assert_eq!(status, 200, "{what}: {answer}");
    let prompt_tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(
        prompt_tokens <= u64::from(prompt_bound),
        "{what}: the worker counted {prompt_tokens} prompt tokens, the hold assumed at most {prompt_bound}"
    );
    let (cost, shortfall): (Decimal, Decimal) = sqlx::query_as("SELECT cost, shortfall FROM cost_records WHERE request_id = $1")
        .bind(answer["id"].as_str().unwrap())
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(cost <= worst_case_cost(&model, body), "{what}: cost {cost} above the hold");
    assert_eq!(shortfall, Decimal::ZERO, "{what}");
}

#[tokio::test]
async fn the_hold_covers_what_the_template_renders() {
    let app = spawn_app().await;
    // 800 `'` in a tool description: `tojson` writes each as `\u0027`.
    let quotes = json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "tools": [tool(&"'".repeat(800))],
                        "tool_choice": "none", "max_tokens": 4, "temperature": 0});
    assert_within_hold(&app, "800 quotes in a tool description", &quotes).await;

    // Many short messages: the template's markers around each outweigh its JSON.
    let messages: Vec<Value> = (0..150).map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "'"})).collect();
    let many = json!({"model": MODEL, "messages": messages, "max_tokens": 4, "temperature": 0});
    assert_within_hold(&app, "150 messages", &many).await;

    // Tool-call arguments are parsed and written back: `1e15` (4 bytes) comes back as
    // `1000000000000000.0` (18), one token per digit for many tokenizers.
    let arguments = format!("{{\"q\": [{}]}}", vec!["1e15"; 120].join(","));
    let call = json!({"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": arguments}});
    let calls = json!({"model": MODEL, "tools": [tool("Looks things up.")], "tool_choice": "none", "max_tokens": 4, "temperature": 0,
                       "messages": [{"role": "user", "content": "Look up the numbers."},
                                    {"role": "assistant", "content": null, "tool_calls": [call]},
                                    {"role": "tool", "tool_call_id": "call_1", "content": "done"}]});
    assert_within_hold(&app, "tool-call arguments written back as JSON", &calls).await;
}

/// A cost above its hold (the bound missed something) is recorded in full, the tenant is charged what it
/// had, the rest is `shortfall` in the record, the CSV and the monthly totals, and another request's hold
/// is not touched. Before, the no-overdraw check refused the settlement and the record was lost.
#[tokio::test]
async fn a_cost_above_the_hold_is_recorded_with_its_shortfall() {
    let app = spawn_app().await;
    let tenant = "nearly-broke";
    common::create_key(&app.db, tenant).await;
    let tenant_id = common::grant(&app.db, tenant, "0.001").await;
    let key_id: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM api_keys WHERE tenant_id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    // The holds name the live gateway, as its own would: a hold of a replica without a live row is released.
    let replica: uuid::Uuid = sqlx::query_scalar("SELECT id FROM gateway_replicas").fetch_one(&app.db).await.unwrap();
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    assert!(runaii_gateway::db::credits::hold(&app.db, tenant_id, "req-over", d("0.0004"), replica).await.unwrap());
    assert!(runaii_gateway::db::credits::hold(&app.db, tenant_id, "req-other", d("0.0005"), replica).await.unwrap());

    let record = |request_id: &str, cost: &str| common::cost_record(request_id, tenant_id, key_id, d(cost));
    // Available to it: its hold (0.0004) and what no other hold reserves (0.0001).
    let settled = costs::settle(&app.db, &[record("req-over", "0.002")]).await.expect("recorded, not refused")[0];
    assert_eq!((settled.charged, settled.shortfall), (d("0.0005"), d("0.0015")));
    let (balance, reserved): (Decimal, Decimal) =
        sqlx::query_as("SELECT balance, reserved FROM tenants WHERE id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    assert_eq!((balance, reserved), (d("0.0005"), d("0.0005")), "the other request's hold is intact");
    let normal = costs::settle(&app.db, &[record("req-other", "0.0001")]).await.unwrap()[0];
    assert_eq!((normal.charged, normal.shortfall), (d("0.0001"), Decimal::ZERO));

    // balance = grants − Σ (cost − shortfall), and the ledger's sum is the balance.
    let (balance, reserved): (Decimal, Decimal) =
        sqlx::query_as("SELECT balance, reserved FROM tenants WHERE id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    let (cost, shortfall): (Decimal, Decimal) = sqlx::query_as("SELECT sum(cost), sum(shortfall) FROM cost_records WHERE tenant_id = $1")
        .bind(tenant_id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    let ledger: Decimal =
        sqlx::query_scalar("SELECT sum(amount) FROM credit_ledger WHERE tenant_id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    assert_eq!((cost, shortfall), (d("0.0021"), d("0.0015")));
    assert_eq!(balance, d("0.001") - (cost - shortfall));
    assert_eq!((balance, reserved), (d("0.0004"), Decimal::ZERO));
    assert_eq!(ledger, balance);

    // Finance sees it: in the records, the CSV and the month's totals.
    let finance = admin_token(&["finance"], None);
    let (_, records) = app.admin(Method::GET, &format!("/admin/v1/cost-records?tenant_id={tenant_id}"), &finance, None).await;
    let over = records["data"].as_array().unwrap().iter().find(|r| r["request_id"] == "req-over").unwrap();
    assert_eq!((over["cost"].as_str(), over["shortfall"].as_str()), (Some("0.0020000000000000"), Some("0.0015000000000000")), "{over}");
    let csv = common::client()
        .get(format!("{}/admin/v1/cost-records?tenant_id={tenant_id}&format=csv", app.base))
        .bearer_auth(&finance)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = header.iter().position(|h| *h == "shortfall").unwrap();
    let line = csv.lines().find(|l| l.starts_with("req-over,")).unwrap();
    assert_eq!(line.split(',').nth(column), Some("0.0015"));
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let (_, totals) =
        app.admin(Method::GET, &format!("/admin/v1/monthly-totals?month={month}&tenant_id={tenant_id}"), &finance, None).await;
    assert_eq!((totals["data"][0]["cost"].as_str(), totals["data"][0]["shortfall"].as_str()), (Some("0.0021"), Some("0.0015")), "{totals}");
}

/// One group, one transaction: records of one tenant are charged in order, each against what the
/// previous left; and a record the database refuses (its request id already has a record) is written
/// alone and refused alone, while the rest of its group is recorded.
#[tokio::test]
async fn a_group_is_charged_in_order_and_one_bad_record_spoils_nothing() {
    let app = spawn_app().await;
    let tenant = "grouped";
    let tenant_id = common::grant(&app.db, tenant, "0.001").await;
    let key_id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM api_keys LIMIT 1").fetch_one(&app.db).await.unwrap();
    let d = |s: &str| s.parse::<Decimal>().unwrap();
    let record = |request_id: &str, cost: &str| common::cost_record(request_id, tenant_id, key_id, d(cost));
    let settled = costs::settle(&app.db, &[record("g-1", "0.0006"), record("g-2", "0.0006")]).await.unwrap();
    assert_eq!((settled[0].charged, settled[0].shortfall), (d("0.0006"), Decimal::ZERO));
    assert_eq!((settled[1].charged, settled[1].shortfall), (d("0.0004"), d("0.0002")), "the second gets what the first left");

    let writer = runaii_gateway::billing::writer::LedgerWriter::start(app.db.clone(), std::time::Duration::ZERO);
    let (a, again, b) =
        tokio::join!(writer.settle(record("g-3", "0")), writer.settle(record("g-1", "0")), writer.settle(record("g-4", "0")));
    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");
    assert!(again.is_err(), "a second record for g-1 is refused");
    let ids: Vec<String> = sqlx::query_scalar("SELECT request_id FROM cost_records WHERE tenant_id = $1 ORDER BY request_id")
        .bind(tenant_id)
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(ids, ["g-1", "g-2", "g-3", "g-4"]);
}

/// No request outlives its credit hold: a stream still running `--max-request-s` after it was sent is
/// ended with an error event and billed for the tokens generated (before, it ran on however long it took,
/// past the hold's expiry, and the credit it held could be spent again); and a gateway whose requests
/// could outlive their holds refuses to start.
#[tokio::test]
async fn a_stream_past_the_request_time_limit_is_ended_and_billed() {
    let app = common::spawn_app_with(|s| s.limits.max_request_s = 2).await;
    let started = std::time::Instant::now();
    let response = app.post("/v1/chat/completions", &runaii_testkit::long_answer_request(2000, 3000, true)).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed < std::time::Duration::from_secs(12), "ended near its 2 s limit, took {elapsed:?}");
    let last = runaii_testkit::sse_data(&text).into_iter().last().unwrap();
    let last: Value = serde_json::from_str(&last).unwrap_or_else(|_| panic!("the last event is the error: {last}"));
    assert_eq!(last["error"]["code"], "request_time_limit", "{last}");
    let rows = app.cost_rows().await;
    assert_eq!(rows.len(), 1, "one record: {rows:?}");
    let (_, status, input, output, cost, code) = &rows[0];
    assert_eq!((status.as_str(), code.as_deref()), ("failed", Some("request_time_limit")));
    assert!(*input > 0 && *output > 0 && *cost > Decimal::ZERO, "the work done is billed: {rows:?}");

    let mut settings = common::test_settings(app.database_url().to_owned());
    settings.limits.max_request_s = settings.limits.hold_expiry_s;
    let refused = runaii_gateway::app::Application::build(settings).await.unwrap_err();
    assert!(refused.to_string().contains("--max-request-s"), "{refused}");
}
