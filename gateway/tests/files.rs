//! The Files API: a tenant's uploads kept whole, read back byte for byte and invisible to other tenants;
//! a batch input checked as it arrives and refused naming its bad line; quotas, sizes and upload times
//! enforced; nothing of a refused upload left behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use futures::StreamExt as _;

use common::{client, create_key, s3, s3_objects, spawn_app, spawn_app_with, store_files_in, test_settings, TestApp, MODEL};
use runaii_testkit::s3::S3Server;
use serde_json::{json, Value};

type Fields = Vec<(&'static str, &'static str)>;

fn line(id: &str, padding: usize) -> String {
    let body = json!({"model": MODEL, "messages": [{"role": "user", "content": format!("Invoice {id} {}", "x".repeat(padding))}], "max_tokens": 8});
    json!({"custom_id": id, "method": "POST", "url": "/v1/chat/completions", "body": body}).to_string()
}

fn input(lines: usize, padding: usize) -> Vec<u8> {
    (0..lines).map(|i| line(&format!("req-{i}"), padding) + "\n").collect::<String>().into_bytes()
}

async fn upload_as(app: &TestApp, key: &str, bytes: Vec<u8>, fields: &[(&str, &str)]) -> (u16, Value) {
    let mut form = reqwest::multipart::Form::new();
    for (name, value) in fields {
        form = form.text((*name).to_owned(), (*value).to_owned());
    }
    form = form.part("file", reqwest::multipart::Part::bytes(bytes).file_name("input.jsonl"));
    let response = client().post(format!("{}/v1/files", app.base)).bearer_auth(key).multipart(form).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn upload(app: &TestApp, bytes: Vec<u8>) -> (u16, Value) {
    upload_as(app, &app.key, bytes, &[("purpose", "batch")]).await
}

async fn get(app: &TestApp, key: &str, path: &str) -> reqwest::Response {
    client().get(format!("{}{path}", app.base)).bearer_auth(key).send().await.unwrap()
}

async fn counts(app: &TestApp) -> (i64, i64) {
    sqlx::query_as("SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM file_parts)").fetch_one(&app.db).await.unwrap()
}

/// What a refused upload began is deleted by a task of its own: wait for it.
async fn nothing_left(app: &TestApp, before: (i64, i64)) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while counts(app).await != before {
        assert!(std::time::Instant::now() < deadline, "a refused upload left {:?} behind (before: {before:?})", counts(app).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_upload_of_several_parts_reads_back_whole_and_only_to_its_tenant() {
    let app = spawn_app().await;
    // 12,000 lines of about a kilobyte: more than one 8 MiB part.
    let bytes = input(12_000, 900);
    assert!(bytes.len() > 8 * 1024 * 1024);
    let (status, file) = upload(&app, bytes.clone()).await;
    assert_eq!(status, 200, "{file}");
    let id = file["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("file-"), "{file}");
    assert_eq!((&file["object"], &file["purpose"], &file["status"]), (&json!("file"), &json!("batch"), &json!("processed")));
    assert_eq!(file["bytes"], bytes.len());
    assert_eq!(file["filename"], "input.jsonl");
    let created = file["created_at"].as_i64().unwrap();
    assert_eq!(file["expires_at"].as_i64().unwrap() - created, 30 * 24 * 3600, "{file}");
    let parts: i64 = sqlx::query_scalar("SELECT count(*) FROM file_parts WHERE file_id = $1").bind(&id).fetch_one(&app.db).await.unwrap();
    assert_eq!(parts, 2);

    let retrieved: Value = get(&app, &app.key, &format!("/v1/files/{id}")).await.json().await.unwrap();
    assert_eq!(retrieved, file);
    let content = get(&app, &app.key, &format!("/v1/files/{id}/content")).await;
    assert_eq!(content.status(), 200);
    assert_eq!(content.headers()["content-length"], bytes.len().to_string().as_str());
    assert!(content.bytes().await.unwrap() == bytes, "the content differs from the upload");
    let list: Value = get(&app, &app.key, "/v1/files").await.json().await.unwrap();
    assert_eq!(list["data"][0]["id"], id.as_str(), "{list}");

    // Another tenant sees nothing of it, and cannot delete it.
    let other = create_key(&app.db, "another-tenant").await;
    for path in [format!("/v1/files/{id}"), format!("/v1/files/{id}/content")] {
        let response = get(&app, &other, &path).await;
        assert_eq!(response.status(), 404, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "not_found", "{body}");
    }
    let list: Value = get(&app, &other, "/v1/files").await.json().await.unwrap();
    assert_eq!(list["data"], json!([]), "{list}");
    let response = client().delete(format!("{}/v1/files/{id}", app.base)).bearer_auth(&other).send().await.unwrap();
    assert_eq!(response.status(), 404);

    let response = client().delete(format!("{}/v1/files/{id}", app.base)).bearer_auth(&app.key).send().await.unwrap();
    let deleted: Value = response.json().await.unwrap();
    assert_eq!(deleted, json!({"id": id, "object": "file", "deleted": true}));
    assert_eq!(get(&app, &app.key, &format!("/v1/files/{id}")).await.status(), 404);
    assert_eq!(counts(&app).await, (0, 0), "the file's bytes outlived it");
}

#[tokio::test]
async fn a_bad_form_or_input_is_refused_by_name_and_leaves_nothing() {
    let app = spawn_app().await;
    let good = || input(3, 10);
    let mut bad_line = good();
    bad_line.extend_from_slice(b"{\"custom_id\": \"x\"}\n");
    let duplicate = [line("a", 1), line("a", 1)].join("\n").into_bytes();
    // (the file, the form's other fields, the param named, words of the message)
    let cases: Vec<(Vec<u8>, Fields, &str, &str)> = vec![
        (bad_line, vec![("purpose", "batch")], "file", "line 4:"),
        (duplicate, vec![("purpose", "batch")], "file", "line 2: custom_id 'a' is used by an earlier line"),
        (line("a", 1).replace("/v1/chat/completions", "/v1/embeddings").into_bytes(), vec![("purpose", "batch")], "file", "its url"),
        (Vec::new(), vec![("purpose", "batch")], "file", "holds no request"),
        (good(), vec![("purpose", "fine-tune")], "purpose", "purpose 'fine-tune' is not offered"),
        (good(), vec![], "purpose", "purpose is required"),
        (good(), vec![("purpose", "batch"), ("expires_after[seconds]", "60")], "expires_after[seconds]", "3600 to 2592000"),
        (good(), vec![("purpose", "batch"), ("expires_after[anchor]", "last_active_at")], "expires_after[anchor]", "created_at"),
        (good(), vec![("purpose", "batch"), ("purpose", "batch")], "purpose", "more than once"),
        (good(), vec![("purpose", "batch"), ("user", "me")], "user", "Unsupported parameter"),
    ];
    for (bytes, fields, param, message) in cases {
        let (status, body) = upload_as(&app, &app.key, bytes, &fields).await;
        assert_eq!(status, 400, "{fields:?}: {body}");
        assert_eq!(body["error"]["param"], param, "{fields:?}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(message), "{fields:?}: {body}");
    }
    // Fields after the file part are read too: a refusal there deletes the file already kept.
    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(good()).file_name("a.jsonl"))
        .text("purpose", "assistants");
    let response = client().post(format!("{}/v1/files", app.base)).bearer_auth(&app.key).multipart(form).send().await.unwrap();
    assert_eq!(response.status(), 400);
    // Not a form at all.
    let response =
        client().post(format!("{}/v1/files", app.base)).bearer_auth(&app.key).json(&json!({"purpose": "batch"})).send().await.unwrap();
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("multipart/form-data"), "{body}");
    nothing_left(&app, (0, 0)).await;

    // The same form, right: accepted, with the expiry asked for.
    let (status, file) = upload_as(
        &app,
        &app.key,
        good(),
        &[("purpose", "batch"), ("expires_after[anchor]", "created_at"), ("expires_after[seconds]", "3600")],
    )
    .await;
    assert_eq!(status, 200, "{file}");
    assert_eq!(file["expires_at"].as_i64().unwrap() - file["created_at"].as_i64().unwrap(), 3600);
}

#[tokio::test]
async fn a_tenant_s_quota_holds_against_concurrent_uploads() {
    let app = spawn_app().await;
    let file = input(2_000, 900); // about 2 MB
    let size = i64::try_from(file.len()).unwrap();
    sqlx::query("INSERT INTO file_storage_terms (tenant_id, max_stored_bytes) VALUES ($1, $2)")
        .bind(app.tenant_id)
        .bind(size * 5 / 2)
        .execute(&app.db)
        .await
        .unwrap();
    let uploads = (0..4).map(|_| upload(&app, file.clone()));
    let answers = futures::future::join_all(uploads).await;
    let kept = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(kept, 2, "{answers:?}");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 200) {
        assert_eq!(
            (*status, &body["error"]["code"], &body["error"]["param"]),
            (400, &json!("storage_quota_exceeded"), &json!("file")),
            "{body}"
        );
    }
    nothing_left(&app, (2, 2)).await;
    // Deleting one makes room for one more.
    let list: Value = get(&app, &app.key, "/v1/files").await.json().await.unwrap();
    let id = list["data"][0]["id"].as_str().unwrap();
    client().delete(format!("{}/v1/files/{id}", app.base)).bearer_auth(&app.key).send().await.unwrap();
    assert_eq!(upload(&app, file).await.0, 200);
}

#[tokio::test]
async fn files_are_listed_in_pages_newest_first() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (status, file) = upload(&app, input(1, 1)).await;
        assert_eq!(status, 200, "{file}");
        ids.push(file["id"].as_str().unwrap().to_owned());
    }
    let page: Value = get(&app, &app.key, "/v1/files?limit=2").await.json().await.unwrap();
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
    assert_eq!((&page["first_id"], &page["last_id"], &page["has_more"]), (&json!(ids[2]), &json!(ids[1]), &json!(true)), "{page}");
    let rest: Value = get(&app, &app.key, &format!("/v1/files?limit=2&after={}", ids[1])).await.json().await.unwrap();
    assert_eq!((&rest["data"][0]["id"], &rest["has_more"]), (&json!(ids[0]), &json!(false)), "{rest}");
    let ascending: Value = get(&app, &app.key, "/v1/files?order=asc").await.json().await.unwrap();
    let order: Vec<&str> = ascending["data"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(order, ids.iter().map(String::as_str).collect::<Vec<_>>());
    let outputs: Value = get(&app, &app.key, "/v1/files?purpose=batch_output").await.json().await.unwrap();
    assert_eq!(outputs["data"], json!([]));
    for (query, param) in [("limit=0", "limit"), ("order=up", "order"), ("after=file-nope", "after"), ("cursor=x", "cursor")] {
        let response = get(&app, &app.key, &format!("/v1/files?{query}")).await;
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["param"], param, "{query}: {body}");
    }

    // Past its expiry a file is gone to every reader, and the sweep deletes it with its bytes.
    sqlx::query("UPDATE files SET expires_at = now() WHERE id = $1").bind(&ids[0]).execute(&app.db).await.unwrap();
    assert_eq!(get(&app, &app.key, &format!("/v1/files/{}", ids[0])).await.status(), 404);
    let expired = runaii_gateway::db::files::expire(&app.db, 600.0).await.unwrap();
    assert_eq!(expired, vec![ids[0].clone()]);
    assert_eq!(counts(&app).await, (2, 2));
}

#[tokio::test]
async fn uploads_have_their_own_size_and_time_limits() {
    let app = spawn_app_with(|s| {
        s.files.max_bytes = 4000;
        s.files.upload_timeout_ms = 1500;
    })
    .await;
    let (status, body) = upload(&app, input(20, 200)).await;
    assert_eq!((status, &body["error"]["code"]), (413, &json!("payload_too_large")), "{body}");
    nothing_left(&app, (0, 0)).await;

    // A form that stops arriving is cut at the upload's deadline.
    let head = "--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.jsonl\"\r\n\r\n";
    let first = format!("{head}{}\n", line("a", 1));
    let stalled = futures::stream::once(async move { Ok::<_, std::io::Error>(first) }).chain(futures::stream::once(async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok("\r\n--b--\r\n".to_owned())
    }));
    let started = std::time::Instant::now();
    let response = client()
        .post(format!("{}/v1/files", app.base))
        .bearer_auth(&app.key)
        .header("content-type", "multipart/form-data; boundary=b")
        .body(reqwest::Body::wrap_stream(stalled))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 408);
    assert!(started.elapsed() < Duration::from_secs(10));
    nothing_left(&app, (0, 0)).await;
}

async fn deletions(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM file_deletions").fetch_one(&app.db).await.unwrap()
}

#[tokio::test]
async fn files_kept_in_an_object_store_read_back_whole_and_leave_nothing_there_when_deleted() {
    let server = s3();
    let mut prefix = String::new();
    let app = spawn_app_with(|s| prefix = store_files_in(s, server)).await;
    let bytes = input(12_000, 900);
    let (status, file) = upload(&app, bytes.clone()).await;
    assert_eq!(status, 200, "{file}");
    let id = file["id"].as_str().unwrap().to_owned();
    // Two parts, as objects in order; nothing of the bytes in Postgres.
    assert_eq!(s3_objects(server, &prefix).await, [format!("{prefix}/files/{id}/000000"), format!("{prefix}/files/{id}/000001")]);
    assert_eq!(counts(&app).await, (1, 0));

    let content = get(&app, &app.key, &format!("/v1/files/{id}/content")).await;
    assert_eq!(content.status(), 200);
    assert!(content.bytes().await.unwrap() == bytes, "the content differs from the upload");
    let other = create_key(&app.db, "another-tenant").await;
    assert_eq!(get(&app, &other, &format!("/v1/files/{id}/content")).await.status(), 404);

    let response = client().delete(format!("{}/v1/files/{id}", app.base)).bearer_auth(&app.key).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(s3_objects(server, &prefix).await, Vec::<String>::new(), "the file's bytes outlived it");
    assert_eq!((counts(&app).await, deletions(&app).await), ((0, 0), 0));
}

#[tokio::test]
async fn bytes_a_store_could_not_forget_while_down_are_forgotten_once_it_is_back() {
    // A server of its own: this test stops it.
    let server = S3Server::start();
    let mut prefix = String::new();
    let app = spawn_app_with(|s| prefix = store_files_in(s, &server)).await;
    let (status, file) = upload(&app, input(3, 10)).await;
    assert_eq!(status, 200, "{file}");
    let id = file["id"].as_str().unwrap().to_owned();

    server.stop_gateway();
    let response = get(&app, &app.key, &format!("/v1/files/{id}/content")).await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "file_storage_unavailable", "{body}");
    // An upload is refused (nothing of it is listed), a deletion done: the file is gone to every reader.
    let (status, body) = upload(&app, input(3, 10)).await;
    assert_eq!((status, &body["error"]["code"]), (503, &json!("file_storage_unavailable")), "{body}");
    nothing_left(&app, (1, 0)).await;
    let response = client().delete(format!("{}/v1/files/{id}", app.base)).bearer_auth(&app.key).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(get(&app, &app.key, &format!("/v1/files/{id}")).await.status(), 404);
    assert_eq!(deletions(&app).await, 2, "the deleted file and the refused upload wait to be forgotten");

    server.start_gateway();
    assert_eq!(s3_objects(&server, &prefix).await.len(), 1, "the deleted file's bytes are still kept");
    // The sweep leaves the last minute's deletions to their deleters: these are older.
    sqlx::query("UPDATE file_deletions SET deleted_at = now() - interval '2 minutes'").execute(&app.db).await.unwrap();
    let mut settings = test_settings(app.database_url().to_owned());
    store_files_in(&mut settings, &server);
    settings.files.store = runaii_gateway::config::FileStore::S3 { bucket: server.bucket.clone(), prefix: prefix.clone() };
    let state = runaii_gateway::state::AppState::new(settings).await.unwrap();
    runaii_gateway::files::expire(&state).await.unwrap();
    assert_eq!(s3_objects(&server, &prefix).await, Vec::<String>::new(), "the sweep left the bytes");
    assert_eq!(deletions(&app).await, 0);
}

#[tokio::test]
async fn a_gateway_whose_bucket_cannot_be_listed_does_not_start() {
    let server = s3();
    let mut settings = test_settings(spawn_app().await.database_url().to_owned());
    store_files_in(&mut settings, server);
    settings.files.store = runaii_gateway::config::FileStore::S3 { bucket: "no-such-bucket".into(), prefix: String::new() };
    let Err(error) = runaii_gateway::Application::build(settings).await else { panic!("a gateway started without its file store") };
    assert!(error.to_string().contains("s3://no-such-bucket cannot be listed"), "{error}");
}
