//! The Batch API on the real worker: a batch of structured-output lines runs to `completed` at the batch
//! price, outside the key's online rate limit, each answer valid against its schema and named by its
//! `custom_id`; a bad input fails validation naming its lines; a cancelled and an expired batch deliver
//! what ran and bill only that; a line left by a dead replica runs again only if it was never billed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{
    client, create_key, invoice_request, invoice_schema, s3, s3_objects, spawn_app, spawn_app_with, store_files_in, TestApp, MODEL,
};
use rust_decimal::Decimal;
use serde_json::{json, Value};

fn chat_line(id: &str, body: &Value) -> String {
    json!({"custom_id": id, "method": "POST", "url": "/v1/chat/completions", "body": body}).to_string()
}

fn invoice_line(id: &str) -> String {
    let mut body = invoice_request();
    body["max_tokens"] = json!(60);
    chat_line(id, &body)
}

fn short_line(id: &str) -> String {
    chat_line(id, &json!({"model": MODEL, "messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 6, "temperature": 0}))
}

async fn upload(app: &TestApp, lines: &[String]) -> String {
    let file = reqwest::multipart::Part::bytes((lines.join("\n") + "\n").into_bytes()).file_name("batch.jsonl");
    let form = reqwest::multipart::Form::new().text("purpose", "batch").part("file", file);
    let response = client().post(format!("{}/v1/files", app.base)).bearer_auth(&app.key).multipart(form).send().await.unwrap();
    let body: Value = response.json().await.unwrap();
    body["id"].as_str().unwrap_or_else(|| panic!("upload refused: {body}")).to_owned()
}

async fn call(app: &TestApp, key: &str, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = client().request(method, format!("{}{path}", app.base)).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn create(app: &TestApp, file: &str) -> Value {
    let body =
        json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h", "metadata": {"job": "invoices"}});
    let (status, batch) = call(app, &app.key, reqwest::Method::POST, "/v1/batches", Some(body)).await;
    assert_eq!(status, 200, "{batch}");
    batch
}

async fn wait_for(app: &TestApp, id: &str, done: &[&str]) -> Value {
    wait_within(app, id, done, 240).await
}

async fn wait_within(app: &TestApp, id: &str, done: &[&str], seconds: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let (_, batch) = call(app, &app.key, reqwest::Method::GET, &format!("/v1/batches/{id}"), None).await;
        if done.contains(&batch["status"].as_str().unwrap()) {
            return batch;
        }
        assert!(Instant::now() < deadline, "batch still {} after {seconds} s: {batch}", batch["status"]);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn file_text(app: &TestApp, id: &Value) -> String {
    let Some(id) = id.as_str() else { return String::new() };
    client().get(format!("{}/v1/files/{id}/content", app.base)).bearer_auth(&app.key).send().await.unwrap().text().await.unwrap()
}

async fn file_lines(app: &TestApp, id: &Value) -> Vec<Value> {
    file_text(app, id).await.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn d(text: &str) -> Decimal {
    text.parse().unwrap()
}

/// The cost records of the batch's lines: (request id, input, cached, output tokens, cost).
async fn records(app: &TestApp, batch: &str) -> Vec<(String, i32, i32, i32, Decimal)> {
    sqlx::query_as(
        "SELECT c.request_id, c.input_tokens, c.cached_tokens, c.output_tokens, c.cost FROM cost_records c
         JOIN batch_lines l ON l.request_id = c.request_id WHERE l.batch_id = $1 ORDER BY l.line",
    )
    .bind(batch)
    .fetch_all(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_batch_of_structured_lines_completes_at_the_batch_price_outside_the_online_limits() {
    let app = spawn_app().await;
    // One request a minute online: a batch of six runs all the same, and leaves that one untouched.
    sqlx::query("UPDATE api_keys SET rpm_limit = 1").execute(&app.db).await.unwrap();
    let ids: Vec<String> = (0..6).map(|i| format!("invoice-{i}")).collect();
    let file = upload(&app, &ids.iter().map(|id| invoice_line(id)).collect::<Vec<_>>()).await;
    let batch = create(&app, &file).await;
    assert_eq!(
        (&batch["object"], &batch["status"], &batch["metadata"]["job"]),
        (&json!("batch"), &json!("validating"), &json!("invoices"))
    );
    let id = batch["id"].as_str().unwrap();

    let batch = wait_for(&app, id, &["completed", "failed", "expired"]).await;
    assert_eq!(batch["status"], "completed", "{batch}");
    assert_eq!(batch["request_counts"], json!({"total": 6, "completed": 6, "failed": 0}));
    assert!(batch["error_file_id"].is_null(), "{batch}");
    for field in ["in_progress_at", "finalizing_at", "completed_at"] {
        assert!(batch[field].is_i64(), "{field}: {batch}");
    }
    let output = file_lines(&app, &batch["output_file_id"]).await;
    let output_text = file_text(&app, &batch["output_file_id"]).await;
    let seen: Vec<&str> = output.iter().map(|l| l["custom_id"].as_str().unwrap()).collect();
    assert_eq!(seen, ids.iter().map(String::as_str).collect::<Vec<_>>(), "in input order");
    let validator = jsonschema::validator_for(&invoice_schema()).unwrap();
    for line in &output {
        assert_eq!(line["response"]["status_code"], 200, "{line}");
        assert!(line["error"].is_null());
        let content = line["response"]["body"]["choices"][0]["message"]["content"].as_str().unwrap();
        let answer: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content}"));
        assert!(validator.is_valid(&answer), "{answer} does not match the schema");
        // The schema's properties in the order it declares them, as the same request answers online.
        let keys: Vec<&str> = answer.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["invoice_number", "due_date", "total", "currency"], "{content}");
        assert_eq!(line["response"]["request_id"], line["response"]["body"]["id"]);
    }

    // One record per line, at half the online price (0.10 and 0.30 per million): what each answer says.
    let records = records(&app, id).await;
    assert_eq!(records.len(), 6);
    let mut total = Decimal::ZERO;
    for ((request_id, input, cached, out, cost), line) in records.iter().zip(&output) {
        assert_eq!(line["response"]["request_id"], request_id.as_str());
        let online = (Decimal::from(*input - *cached) * d("0.10") + Decimal::from(*cached) * d("0.10") + Decimal::from(*out) * d("0.30"))
            / Decimal::from(1_000_000);
        assert_eq!(*cost, online * d("0.5"), "{request_id}");
        assert!(output_text.contains(&format!("\"cost\":{}", cost.normalize())), "{request_id}'s answer does not say {cost}");
        total += cost;
    }
    assert_eq!(batch["usage"]["cost"], total.normalize().to_string());

    // Finance sees the batch apart: each record names its batch, and the month's totals split it out.
    let finance = common::admin_token(&["finance"], None);
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let (_, totals) = app.admin(reqwest::Method::GET, &format!("/admin/v1/monthly-totals?month={month}"), &finance, None).await;
    let mine = totals["data"].as_array().unwrap().iter().find(|t| t["tenant_id"] == app.tenant_id.to_string()).unwrap();
    assert_eq!((&mine["batch_requests"], &mine["batch_cost"]), (&json!(6), &json!(total.normalize().to_string())), "{mine}");
    let csv = client()
        .get(format!("{}/admin/v1/cost-records?format=csv&tenant_id={}", app.base, app.tenant_id))
        .bearer_auth(&finance)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",latency_ms,batch_id"));
    assert_eq!(csv.lines().filter(|l| l.ends_with(&format!(",{id}"))).count(), 6, "{csv}");
    let response = client()
        .post(format!("{}/v1/chat/completions", app.base))
        .bearer_auth(&app.key)
        .json(&json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "the batch spent the key's online budget");

    // The batch and its files are the tenant's alone.
    let other = create_key(&app.db, "another-tenant").await;
    let (status, _) = call(&app, &other, reqwest::Method::GET, &format!("/v1/batches/{id}"), None).await;
    assert_eq!(status, 404);
    let (_, list) = call(&app, &other, reqwest::Method::GET, "/v1/batches", None).await;
    assert_eq!(list["data"], json!([]));
    let (_, list) = call(&app, &app.key, reqwest::Method::GET, "/v1/batches", None).await;
    assert_eq!(list["data"][0]["id"], id);
}

#[tokio::test]
async fn a_batch_reads_its_input_from_and_writes_its_answers_to_an_object_store() {
    let server = s3();
    let mut prefix = String::new();
    let app = spawn_app_with(|s| prefix = store_files_in(s, server)).await;
    let ids = ["a", "b", "c"];
    let file = upload(&app, &ids.map(short_line)).await;
    let batch = create(&app, &file).await;
    let batch = wait_for(&app, batch["id"].as_str().unwrap(), &["completed", "failed", "expired"]).await;
    assert_eq!((&batch["status"], &batch["request_counts"]["completed"]), (&json!("completed"), &json!(3)), "{batch}");
    let output = file_lines(&app, &batch["output_file_id"]).await;
    let seen: Vec<&str> = output.iter().map(|l| l["custom_id"].as_str().unwrap()).collect();
    assert_eq!(seen, ids);
    let out_id = batch["output_file_id"].as_str().unwrap();
    assert_eq!(s3_objects(server, &prefix).await, [format!("{prefix}/files/{file}/000000"), format!("{prefix}/files/{out_id}/000000")]);
    let in_postgres: i64 = sqlx::query_scalar("SELECT count(*) FROM file_parts").fetch_one(&app.db).await.unwrap();
    assert_eq!(in_postgres, 0);
}

#[tokio::test]
async fn an_input_that_does_not_fit_the_batch_fails_validation_naming_its_lines() {
    let app = spawn_app().await;
    let mut other_model = json!({"model": "no-such-model", "messages": [{"role": "user", "content": "Hi"}]});
    let lines = vec![
        short_line("ok"),
        json!({"custom_id": "r", "method": "POST", "url": "/v1/responses", "body": {"model": MODEL, "input": "Hi"}}).to_string(),
        chat_line("m", &other_model),
        {
            other_model["model"] = json!(MODEL);
            other_model["stream"] = json!(true);
            chat_line("s", &other_model)
        },
    ];
    let file = upload(&app, &lines).await;
    let batch = create(&app, &file).await;
    let batch = wait_for(&app, batch["id"].as_str().unwrap(), &["failed", "in_progress", "completed"]).await;
    assert_eq!(batch["status"], "failed", "{batch}");
    let errors: Vec<(i64, &str)> =
        batch["errors"]["data"].as_array().unwrap().iter().map(|e| (e["line"].as_i64().unwrap(), e["code"].as_str().unwrap())).collect();
    assert_eq!(errors, vec![(2, "mismatched_url"), (3, "model_not_found"), (4, "invalid_request")], "{batch}");
    assert_eq!(app.cost_rows().await.len(), 0, "nothing ran");

    // What the API itself refuses: each by name.
    let refusals = [
        (json!({"input_file_id": file, "endpoint": "/v1/embeddings", "completion_window": "24h"}), "endpoint"),
        (json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "1h"}), "completion_window"),
        (json!({"input_file_id": "file-nope", "endpoint": "/v1/chat/completions", "completion_window": "24h"}), "input_file_id"),
        (json!({"input_file_id": file, "endpoint": "/v1/chat/completions", "completion_window": "24h", "priority": 1}), "priority"),
    ];
    for (body, param) in refusals {
        let (status, answer) = call(&app, &app.key, reqwest::Method::POST, "/v1/batches", Some(body)).await;
        assert_eq!((status, &answer["error"]["param"]), (400, &json!(param)), "{answer}");
    }
}

#[tokio::test]
async fn a_tenant_s_unfinished_batches_hold_at_most_its_enqueued_tokens() {
    // What one short line may use, as the gateway bounds it: its prompt's bound and its 6 tokens.
    let probe = spawn_app().await;
    let model = runaii_gateway::db::models::list_enabled(&probe.db).await.unwrap().into_iter().find(|m| m.id == MODEL).unwrap();
    let body = serde_json::from_str::<Value>(&short_line("x")).unwrap()["body"].clone();
    let (prompt, output) = runaii_gateway::billing::worst_case_tokens(&model, &body);
    let per_line = i64::from(prompt) + i64::from(output);
    // Room for one batch of 30 lines, not two.
    let app = spawn_app_with(|s| {
        s.batches.max_enqueued_tokens = per_line * 45;
        s.batches.concurrency = 1;
    })
    .await;
    let lines: Vec<String> = (0..30).map(|i| short_line(&format!("line-{i}"))).collect();
    let first = create(&app, &upload(&app, &lines).await).await["id"].as_str().unwrap().to_owned();
    wait_for(&app, &first, &["in_progress"]).await;
    let enqueued: i64 =
        sqlx::query_scalar("SELECT enqueued_tokens FROM batches WHERE id = $1").bind(&first).fetch_one(&app.db).await.unwrap();
    assert_eq!(enqueued, per_line * 30);
    let second = create(&app, &upload(&app, &lines).await).await["id"].as_str().unwrap().to_owned();
    let refused = wait_for(&app, &second, &["failed", "in_progress", "completed"]).await;
    assert_eq!(refused["status"], "failed", "{refused}");
    assert_eq!(refused["errors"]["data"][0]["code"], "token_limit_exceeded", "{refused}");
    // Once the first has finished, the same batch is taken.
    wait_for(&app, &first, &["completed"]).await;
    let third = create(&app, &upload(&app, &lines).await).await["id"].as_str().unwrap().to_owned();
    assert_eq!(wait_for(&app, &third, &["completed", "failed"]).await["status"], "completed");
}

#[tokio::test]
async fn a_cancelled_batch_delivers_and_bills_only_what_ran() {
    let app = spawn_app_with(|s| s.batches.concurrency = 1).await;
    let lines: Vec<String> = (0..30).map(|i| short_line(&format!("line-{i}"))).collect();
    let file = upload(&app, &lines).await;
    let batch = create(&app, &file).await;
    let id = batch["id"].as_str().unwrap();
    wait_for(&app, id, &["in_progress"]).await;
    let (status, cancelling) = call(&app, &app.key, reqwest::Method::POST, &format!("/v1/batches/{id}/cancel"), None).await;
    assert_eq!(status, 200);
    assert!(["cancelling", "cancelled"].contains(&cancelling["status"].as_str().unwrap()), "{cancelling}");
    let batch = wait_for(&app, id, &["cancelled"]).await;
    let ran = batch["request_counts"]["completed"].as_i64().unwrap() + batch["request_counts"]["failed"].as_i64().unwrap();
    assert!(ran < 30, "{batch}");
    let output = file_lines(&app, &batch["output_file_id"]).await;
    let errors = file_lines(&app, &batch["error_file_id"]).await;
    assert_eq!(output.len() + errors.len(), 30, "every line is accounted for");
    let cancelled = errors.iter().filter(|l| l["error"]["code"] == "batch_cancelled").count();
    assert_eq!(usize::try_from(ran).unwrap() + cancelled, 30);
    assert_eq!(records(&app, id).await.len(), usize::try_from(ran).unwrap(), "billed only what ran");
}

#[tokio::test]
async fn a_finalize_that_fails_is_tried_again_soon_and_delivers_and_bills_once() {
    let app = spawn_app_with(|s| s.batches.concurrency = 1).await;
    // Postgres refuses the first try to end a batch, after that try has written its files: the fault of a
    // database that fails one statement (a connection lost, a pool timing out) at the worst moment.
    sqlx::raw_sql(
        "CREATE SEQUENCE finalize_refusals;
         CREATE FUNCTION refuse_first_finish() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF nextval('finalize_refusals') = 1 THEN
                 RAISE EXCEPTION 'injected fault: the batch is not ended this time';
             END IF;
             RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_first_finish BEFORE UPDATE ON batches FOR EACH ROW
             WHEN (OLD.status = 'finalizing' AND NEW.status <> 'finalizing') EXECUTE FUNCTION refuse_first_finish();",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let lines: Vec<String> = (0..30).map(|i| short_line(&format!("line-{i}"))).collect();
    let file = upload(&app, &lines).await;
    let id = create(&app, &file).await["id"].as_str().unwrap().to_owned();
    wait_for(&app, &id, &["in_progress"]).await;
    let (status, _) = call(&app, &app.key, reqwest::Method::POST, &format!("/v1/batches/{id}/cancel"), None).await;
    assert_eq!(status, 200);

    // Well within the lease a try holds (ten minutes): the failed try gave its batch back.
    let batch = wait_within(&app, &id, &["cancelled"], 60).await;
    let tries: i64 = sqlx::query_scalar("SELECT last_value FROM finalize_refusals").fetch_one(&app.db).await.unwrap();
    assert!(tries >= 2, "the fault was not hit: {tries}");
    let ran = batch["request_counts"]["completed"].as_i64().unwrap() + batch["request_counts"]["failed"].as_i64().unwrap();
    let output = file_lines(&app, &batch["output_file_id"]).await;
    let errors = file_lines(&app, &batch["error_file_id"]).await;
    assert_eq!(output.len() + errors.len(), 30, "every line is accounted for, once: {batch}");
    assert_eq!(records(&app, &id).await.len(), usize::try_from(ran).unwrap(), "billed only what ran, once");
    // The failed try's files are gone: the tenant has its input and the batch's files, nothing more.
    let (_, files) = call(&app, &app.key, reqwest::Method::GET, "/v1/files", None).await;
    let mut listed: Vec<&str> = files["data"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    listed.sort_unstable();
    let mut expected: Vec<&str> =
        [Some(file.as_str()), batch["output_file_id"].as_str(), batch["error_file_id"].as_str()].into_iter().flatten().collect();
    expected.sort_unstable();
    assert_eq!(listed, expected, "{files}");
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM files").fetch_one(&app.db).await.unwrap();
    assert_eq!(kept, i64::try_from(expected.len()).unwrap());
}

#[tokio::test]
async fn a_line_put_back_after_its_batch_was_cancelled_is_cancelled_and_the_batch_ends() {
    let app = spawn_app().await;
    let (key_id, tenant): (uuid::Uuid, uuid::Uuid) =
        sqlx::query_as("SELECT id, tenant_id FROM api_keys WHERE public_id = $1").bind(&app.key[3..15]).fetch_one(&app.db).await.unwrap();
    // A batch cancelled while its line 0 ran on a replica that then died before its worker answered
    // (nothing billed): taken back, the line is pending again, in a batch no longer running. A line whose
    // worker was busy (503, put back to wait) after the cancel is the same.
    let dead = uuid::Uuid::now_v7();
    let mut tx = app.db.begin().await.unwrap();
    running_batch(&mut tx, key_id, tenant, "batch_c1", 3).await;
    sqlx::query("UPDATE batches SET status = 'cancelling', cancelling_at = now() WHERE id = 'batch_c1'").execute(&mut *tx).await.unwrap();
    sqlx::query("UPDATE batch_lines SET state = CASE WHEN line = 0 THEN 'running' ELSE 'cancelled' END, claimed_by = $1")
        .bind(dead)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let batch = wait_within(&app, "batch_c1", &["cancelled"], 30).await;
    assert_eq!(batch["request_counts"], json!({"total": 3, "completed": 0, "failed": 0}), "{batch}");
    let errors = file_lines(&app, &batch["error_file_id"]).await;
    let codes: Vec<&str> = errors.iter().map(|l| l["error"]["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["batch_cancelled"; 3], "{errors:?}");
    assert!(records(&app, "batch_c1").await.is_empty(), "nothing ran, nothing billed");
}

#[tokio::test]
async fn an_expired_batch_delivers_what_finished_and_expires_the_rest() {
    let app = spawn_app_with(|s| s.batches.concurrency = 1).await;
    let lines: Vec<String> = (0..30).map(|i| short_line(&format!("line-{i}"))).collect();
    let file = upload(&app, &lines).await;
    let id = create(&app, &file).await["id"].as_str().unwrap().to_owned();
    wait_for(&app, &id, &["in_progress"]).await;
    sqlx::query("UPDATE batches SET expires_at = now() WHERE id = $1").bind(&id).execute(&app.db).await.unwrap();
    let batch = wait_for(&app, &id, &["expired", "completed"]).await;
    assert_eq!(batch["status"], "expired", "{batch}");
    let errors = file_lines(&app, &batch["error_file_id"]).await;
    let expired = errors.iter().filter(|l| l["error"]["code"] == "batch_expired").count();
    let ran = usize::try_from(batch["request_counts"]["completed"].as_i64().unwrap()).unwrap();
    assert!(expired > 0, "{batch}");
    assert_eq!(ran + expired, 30, "{batch}");
    assert_eq!(records(&app, &id).await.len(), ran);
}

#[tokio::test]
async fn a_line_left_by_a_dead_replica_runs_again_only_if_it_was_never_billed() {
    let app = spawn_app().await;
    let lines: Vec<String> = (0..3).map(|i| short_line(&format!("line-{i}"))).collect();
    let file = upload(&app, &lines).await;
    let id = create(&app, &file).await["id"].as_str().unwrap().to_owned();
    wait_for(&app, &id, &["completed"]).await;
    // A replica that died mid-batch: line 0 was billed and its answer lost with it; line 3 was claimed and
    // never reached its worker. Both left `running` under a replica no longer alive.
    let dead = uuid::Uuid::now_v7();
    let mut tx = app.db.begin().await.unwrap();
    sqlx::query("UPDATE batches SET status = 'in_progress', completed_at = NULL, finalizing_at = NULL WHERE id = $1")
        .bind(&id)
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "UPDATE batch_lines SET state = 'running', claimed_by = $2, status_code = NULL, response = NULL WHERE batch_id = $1 AND line = 0",
    )
    .bind(&id)
    .bind(dead)
    .execute(&mut *tx)
    .await
    .unwrap();
    let body = serde_json::from_str::<Value>(&short_line("line-3")).unwrap()["body"].clone();
    sqlx::query(
        "INSERT INTO batch_lines (batch_id, line, custom_id, request_id, body, state, claimed_by)
         VALUES ($1, 3, 'line-3', 'chatcmpl-left-by-a-dead-replica', $2, 'running', $3)",
    )
    .bind(&id)
    .bind(&body)
    .bind(dead)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let batch = wait_for(&app, &id, &["completed"]).await;
    assert_eq!(batch["request_counts"], json!({"total": 4, "completed": 3, "failed": 1}), "{batch}");
    let billed: Vec<String> = records(&app, &id).await.into_iter().map(|r| r.0).collect();
    assert_eq!(billed.len(), 4, "one record per line, none twice: {billed:?}");
    assert!(billed.contains(&"chatcmpl-left-by-a-dead-replica".to_owned()));
    let errors = file_lines(&app, &batch["error_file_id"]).await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!((&errors[0]["custom_id"], &errors[0]["response"]["body"]["error"]["code"]), (&json!("line-0"), &json!("batch_line_lost")));
    let output = file_lines(&app, &batch["output_file_id"]).await;
    let ids: Vec<&str> = output.iter().map(|l| l["custom_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["line-1", "line-2", "line-3"]);
}

/// Inserts a running batch of `lines` short lines of `tenant`'s key `key_id`, as validation leaves one.
async fn running_batch(tx: &mut sqlx::PgConnection, key_id: uuid::Uuid, tenant: uuid::Uuid, id: &str, lines: usize) {
    sqlx::query(
        "INSERT INTO batches (id, tenant_id, api_key_id, endpoint, input_file_id, completion_window, status, expires_at, in_progress_at)
         VALUES ($1, $2, $3, '/v1/chat/completions', 'file-x', '24h', 'in_progress', now() + interval '1 day', now())",
    )
    .bind(id)
    .bind(tenant)
    .bind(key_id)
    .execute(&mut *tx)
    .await
    .unwrap();
    for line in 0..lines {
        let body = serde_json::from_str::<Value>(&short_line("x")).unwrap()["body"].clone();
        sqlx::query("INSERT INTO batch_lines (batch_id, line, custom_id, request_id, body, state) VALUES ($1, $2, $3, $4, $5, 'pending')")
            .bind(id)
            .bind(i32::try_from(line).unwrap())
            .bind(format!("{id}-{line}"))
            .bind(format!("chatcmpl-{id}-{line}"))
            .bind(&body)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn tenants_take_turns_whatever_number_of_batches_each_has() {
    let app = spawn_app_with(|s| s.batches.concurrency = 1).await;
    let other_key = create_key(&app.db, "other-tenant").await;
    common::grant(&app.db, "other-tenant", "5").await;
    let key_of = |key: &str| {
        let public_id = key[3..15].to_owned();
        let db = app.db.clone();
        async move {
            let row: (uuid::Uuid, uuid::Uuid) =
                sqlx::query_as("SELECT id, tenant_id FROM api_keys WHERE public_id = $1").bind(public_id).fetch_one(&db).await.unwrap();
            row
        }
    };
    let (mine, me) = key_of(&app.key).await;
    let (theirs, them) = key_of(&other_key).await;
    // Three batches of mine, one of theirs, all running from the same moment, four lines each.
    let mut tx = app.db.begin().await.unwrap();
    for (id, key, tenant) in [("batch_a1", mine, me), ("batch_a2", mine, me), ("batch_a3", mine, me), ("batch_b1", theirs, them)] {
        running_batch(&mut tx, key, tenant, id, 4).await;
    }
    tx.commit().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left: i64 =
            sqlx::query_scalar("SELECT count(*) FROM batch_lines WHERE state IN ('pending', 'running')").fetch_one(&app.db).await.unwrap();
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} lines still to run");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let order: Vec<String> = sqlx::query_scalar("SELECT batch_id FROM batch_lines ORDER BY claimed_at").fetch_all(&app.db).await.unwrap();
    // While both tenants have lines waiting (their four), every other claim is theirs.
    let first_eight: Vec<bool> = order.iter().take(8).map(|b| b == "batch_b1").collect();
    assert_eq!(first_eight.iter().filter(|t| **t).count(), 4, "{order:?}");
    assert!(first_eight.windows(2).all(|w| w[0] != w[1]), "the tenants alternate: {order:?}");

    // The list pages through my three, newest first (same moment: by id), each with its counts.
    let (status, page) = call(&app, &app.key, reqwest::Method::GET, "/v1/batches?limit=2", None).await;
    assert_eq!(status, 200, "{page}");
    let ids: Vec<&str> = page["data"].as_array().unwrap().iter().map(|b| b["id"].as_str().unwrap()).collect();
    assert_eq!((ids.as_slice(), &page["has_more"]), (["batch_a3", "batch_a2"].as_slice(), &json!(true)), "{page}");
    assert!(
        page["data"].as_array().unwrap().iter().all(|b| b["request_counts"] == json!({"total": 4, "completed": 4, "failed": 0})),
        "{page}"
    );
    let (_, rest) = call(&app, &app.key, reqwest::Method::GET, "/v1/batches?limit=2&after=batch_a2", None).await;
    assert_eq!(
        (&rest["data"][0]["id"], rest["data"].as_array().unwrap().len(), &rest["has_more"]),
        (&json!("batch_a1"), 1, &json!(false)),
        "{rest}"
    );
    assert_eq!(rest["data"][0]["request_counts"]["completed"], 4, "{rest}");
}
