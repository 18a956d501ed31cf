//! The admin API: JWT checks, roles, the catalog, tenants and keys, credit grants, finance reports that
//! reconcile to the last digit, tenant isolation, and an audit entry for every change.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{admin_token, spawn_app, TestApp, ADMIN_SECRET, MODEL};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{json, Value};

fn tiny() -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0})
}

fn signed(secret: &str, claims: &Value) -> String {
    jsonwebtoken::encode(&jsonwebtoken::Header::default(), claims, &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap())
        .unwrap()
}

#[tokio::test]
async fn tokens_are_checked_for_signature_expiry_exp_and_role() {
    let app = spawn_app().await;
    let path = "/admin/v1/tenants";
    let now = chrono::Utc::now().timestamp();
    let cases = [
        ("no token", String::new(), 401),
        ("an API key", app.key.clone(), 401),
        ("expired", signed(ADMIN_SECRET, &json!({"sub": "x", "exp": now - 120, "roles": ["admin"]})), 401),
        ("bad signature", signed("another-secret-of-at-least-32-bytes!!", &json!({"sub": "x", "exp": now + 600, "roles": ["admin"]})), 401),
        ("missing exp", signed(ADMIN_SECRET, &json!({"sub": "x", "roles": ["admin"]})), 401),
        ("wrong role", admin_token(&["ops"], None), 403),
        ("right role", admin_token(&["admin"], None), 200),
    ];
    for (what, token, want) in cases {
        let (status, body) = app.admin(Method::GET, path, &token, None).await;
        assert_eq!(status, want, "{what}: {body}");
        if want != 200 {
            let code = body["error"]["code"].as_str().unwrap();
            assert!(code == "invalid_admin_token" || code == "insufficient_role", "{what}: {body}");
            assert!(!body.to_string().contains(&app.key), "a presented key is never echoed");
        }
    }
    // The finance role reads tenants but cannot create one.
    let finance = admin_token(&["finance"], None);
    assert_eq!(app.admin(Method::GET, path, &finance, None).await.0, 200);
    let (status, body) = app.admin(Method::POST, path, &finance, Some(&json!({"name": "nope"}))).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "insufficient_role");
}

async fn post(app: &TestApp, token: &str, path: &str, body: Value) -> Value {
    let (status, answer) = app.admin(Method::POST, path, token, Some(&body)).await;
    assert_eq!(status, 200, "POST {path}: {answer}");
    answer
}

#[tokio::test]
async fn admins_run_tenants_keys_and_credits_and_finance_reconciles_to_the_digit() {
    let app = spawn_app().await;
    let admin = admin_token(&["admin"], None);
    let finance = admin_token(&["finance"], None);

    let tenant = post(&app, &admin, "/admin/v1/tenants", json!({"name": "acme"})).await;
    let tid = tenant["id"].as_str().unwrap().to_owned();
    assert_eq!(tenant["balance"], "0");
    let (status, _) = app.admin(Method::POST, "/admin/v1/tenants", &admin, Some(&json!({"name": "acme"}))).await;
    assert_eq!(status, 409, "names are unique");

    let key = post(&app, &admin, &format!("/admin/v1/tenants/{tid}/keys"), json!({"name": "prod", "rpm_limit": 100})).await;
    let secret = key["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("rk-"));
    let (_, listed) = app.admin(Method::GET, &format!("/admin/v1/tenants/{tid}/keys"), &admin, None).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert!(!listed.to_string().contains(&secret), "the secret is shown once");
    assert!(listed.to_string().contains(key["public_id"].as_str().unwrap()));

    // No credit yet: 402. Then a grant, and the key works.
    assert_eq!(app.post_as(&secret, "/v1/chat/completions", &tiny(), &[]).await.status(), 402);
    let granted = post(&app, &admin, &format!("/admin/v1/tenants/{tid}/credits"), json!({"amount": "0.5", "note": "trial"})).await;
    assert_eq!(granted["balance"], "0.5");
    let mut told = Decimal::ZERO;
    for _ in 0..3 {
        let r = app.post_as(&secret, "/v1/chat/completions", &tiny(), &[]).await;
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        told += serde_json::to_string(&body["usage"]["cost"]).unwrap().parse::<Decimal>().unwrap();
    }

    // Finance: records by tenant, paginated; a CSV export for the month sums to the monthly total.
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let (status, page1) = app.admin(Method::GET, &format!("/admin/v1/cost-records?tenant_id={tid}&limit=2"), &finance, None).await;
    assert_eq!(status, 200, "{page1}");
    assert_eq!(page1["data"].as_array().unwrap().len(), 2);
    assert_eq!(page1["has_more"], true);
    let cursor = page1["next_cursor"].as_str().unwrap();
    let (_, page2) =
        app.admin(Method::GET, &format!("/admin/v1/cost-records?tenant_id={tid}&limit=2&cursor={cursor}"), &finance, None).await;
    assert_eq!(page2["data"].as_array().unwrap().len(), 1);
    assert_eq!(page2["has_more"], false);
    let ids: Vec<&str> = page1["data"]
        .as_array()
        .unwrap()
        .iter()
        .chain(page2["data"].as_array().unwrap())
        .map(|r| r["request_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] != w[1]));

    let csv = common::client()
        .get(format!("{}/admin/v1/cost-records?month={month}&format=csv", app.base))
        .bearer_auth(&finance)
        .send()
        .await
        .unwrap();
    assert!(csv.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let csv = csv.text().await.unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let (tenant_col, cost_col) =
        (header.iter().position(|h| *h == "tenant_id").unwrap(), header.iter().position(|h| *h == "cost").unwrap());
    let mut per_tenant: std::collections::HashMap<String, Decimal> = std::collections::HashMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        *per_tenant.entry(fields[tenant_col].to_owned()).or_default() += fields[cost_col].parse::<Decimal>().unwrap();
    }
    let (_, totals) = app.admin(Method::GET, &format!("/admin/v1/monthly-totals?month={month}"), &finance, None).await;
    let totals = totals["data"].as_array().unwrap();
    assert_eq!(totals.len(), per_tenant.len());
    for t in totals {
        let total: Decimal = t["cost"].as_str().unwrap().parse().unwrap();
        assert_eq!(per_tenant[t["tenant_id"].as_str().unwrap()], total, "CSV sums to the monthly total: {t}");
    }
    let acme = totals.iter().find(|t| t["tenant_id"] == tid.as_str()).unwrap();
    assert_eq!(acme["cost"].as_str().unwrap().parse::<Decimal>().unwrap(), told, "and to what the clients were told");
    assert_eq!(acme["requests"], 3);

    // The credit ledger explains the balance.
    let (_, tenant_now) = app.admin(Method::GET, &format!("/admin/v1/tenants/{tid}"), &finance, None).await;
    let (_, ledger) = app.admin(Method::GET, &format!("/admin/v1/tenants/{tid}/credit-ledger"), &finance, None).await;
    let ledger_sum: Decimal =
        ledger["data"].as_array().unwrap().iter().map(|e| e["amount"].as_str().unwrap().parse::<Decimal>().unwrap()).sum();
    assert_eq!(tenant_now["balance"].as_str().unwrap().parse::<Decimal>().unwrap(), ledger_sum);
    assert_eq!(ledger_sum, "0.5".parse::<Decimal>().unwrap() - told);

    // Revoking the key stops it (within the key cache's 300 ms).
    let key_id = key["id"].as_str().unwrap();
    let (status, revoked) = app.admin(Method::DELETE, &format!("/admin/v1/keys/{key_id}"), &admin, None).await;
    assert_eq!(status, 200, "{revoked}");
    assert!(revoked["revoked_at"].is_string());
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(app.post_as(&secret, "/v1/chat/completions", &tiny(), &[]).await.status(), 401);

    // Every change is in the audit log, with who and before/after, and never a secret.
    let (_, audit) = app.admin(Method::GET, "/admin/v1/audit-log", &admin, None).await;
    let ours = by_tester(&audit);
    let actions: Vec<&str> = ours.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["tenant.create", "key.create", "credits.grant", "key.revoke"]);
    let revoke = ours[3];
    assert!(revoke["before"]["revoked_at"].is_null() && revoke["after"]["revoked_at"].is_string());
    let text = audit.to_string();
    let secret_part = secret.rsplit('-').next().unwrap();
    assert!(!text.contains(secret_part) && !text.contains("secret_hash"), "no secret in the audit log");
    let (status, _) = app.admin(Method::GET, "/admin/v1/audit-log", &finance, None).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn ops_run_the_catalog_and_changes_are_audited() {
    let app = spawn_app().await;
    let ops = admin_token(&["ops"], None);
    let (status, catalog) = app.admin(Method::GET, "/admin/v1/models", &ops, None).await;
    assert_eq!(status, 200);
    let ours = catalog["data"].as_array().unwrap().iter().find(|m| m["id"] == MODEL).unwrap();
    assert_eq!(ours["is_ready"], true);
    assert_eq!(ours["workers"].as_array().unwrap().len(), 1);

    let created = post(
        &app,
        &ops,
        "/admin/v1/models",
        json!({"id": "org/new-model", "context_length": 2048, "input_price_per_mtok": "1.5", "output_price_per_mtok": "2"}),
    )
    .await;
    assert_eq!(created["input_price_per_mtok"].as_str().unwrap().parse::<Decimal>().unwrap(), "1.5".parse::<Decimal>().unwrap());
    let (status, bad) = app
        .admin(
            Method::POST,
            "/admin/v1/models",
            &ops,
            Some(&json!({"id": "x", "context_length": 0, "input_price_per_mtok": "1", "output_price_per_mtok": "1"})),
        )
        .await;
    assert_eq!(status, 400, "a zero context is refused: {bad}");
    assert_eq!(bad["error"]["param"], "context_length");

    // A price change applies to the next request; disabling hides and refuses the model.
    let (status, _) =
        app.admin(Method::PATCH, &format!("/admin/v1/models/{MODEL}"), &ops, Some(&json!({"output_price_per_mtok": "3"}))).await;
    assert_eq!(status, 200);
    let (_, body, _) = app.post_json("/v1/chat/completions", &tiny()).await;
    let (input, output) = (body["usage"]["prompt_tokens"].as_u64().unwrap(), body["usage"]["completion_tokens"].as_u64().unwrap());
    let expected = (Decimal::from(input) * Decimal::new(1, 1) + Decimal::from(output) * Decimal::from(3)) / Decimal::from(1_000_000);
    assert_eq!(serde_json::to_string(&body["usage"]["cost"]).unwrap().parse::<Decimal>().unwrap(), expected.normalize());
    let (status, _) = app.admin(Method::PATCH, &format!("/admin/v1/models/{MODEL}"), &ops, Some(&json!({"enabled": false}))).await;
    assert_eq!(status, 200);
    let (status, body, _) = app.post_json("/v1/chat/completions", &tiny()).await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = app.admin(Method::PATCH, "/admin/v1/models/nope", &ops, Some(&json!({"enabled": true}))).await;
    assert_eq!(status, 404);

    let (status, workers) = app.admin(Method::GET, "/admin/v1/workers", &ops, None).await;
    assert_eq!(status, 200);
    assert!(workers["data"].as_array().unwrap().iter().any(|w| w["model"] == MODEL && w["ready"] == true), "{workers}");

    let admin = admin_token(&["admin"], None);
    let (_, audit) = app.admin(Method::GET, "/admin/v1/audit-log?target_type=model", &admin, None).await;
    let entries = by_tester(&audit);
    assert_eq!(entries.len(), 3, "create, price change, disable: {audit}");
    assert_eq!(entries[1]["before"]["output_price_per_mtok"], "0.3000000000");
    assert_eq!(entries[1]["after"]["output_price_per_mtok"], "3.0000000000");
    assert_eq!(entries[2]["after"]["enabled"], false);
}

#[tokio::test]
async fn tenants_never_see_each_others_records_or_private_models() {
    let app = spawn_app().await;
    let other_key = common::create_key(&app.db, "other").await;
    let other_id = common::grant(&app.db, "other", "1").await;
    assert_eq!(app.post_json("/v1/chat/completions", &tiny()).await.0, 200);
    assert_eq!(app.post_as(&other_key, "/v1/chat/completions", &tiny(), &[]).await.status(), 200);

    // A finance token confined to one tenant sees its records only, and nothing of the other.
    let confined = admin_token(&["finance", "admin"], Some(app.tenant_id));
    let (_, records) = app.admin(Method::GET, "/admin/v1/cost-records", &confined, None).await;
    let records = records["data"].as_array().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["tenant_id"], app.tenant_id.to_string());
    let (status, _) = app.admin(Method::GET, &format!("/admin/v1/cost-records?tenant_id={other_id}"), &confined, None).await;
    assert_eq!(status, 404);
    let (status, _) = app.admin(Method::GET, &format!("/admin/v1/tenants/{other_id}"), &confined, None).await;
    assert_eq!(status, 404);
    let (status, _) =
        app.admin(Method::POST, &format!("/admin/v1/tenants/{other_id}/credits"), &confined, Some(&json!({"amount": "5"}))).await;
    assert_eq!(status, 403, "nor grant it credit (a confined token grants none at all)");
    let (_, tenants) = app.admin(Method::GET, "/admin/v1/tenants", &confined, None).await;
    assert_eq!(tenants["data"].as_array().unwrap().len(), 1);

    // A private model is listed and served only to tenants granted it (a worker serves one model id, so
    // the embedded model itself is made private).
    let ops = admin_token(&["ops"], None);
    let (status, _) = app.admin(Method::PATCH, &format!("/admin/v1/models/{MODEL}"), &ops, Some(&json!({"public": false}))).await;
    assert_eq!(status, 200);
    let admin = admin_token(&["admin"], None);
    let (status, _) = app.admin(Method::PUT, &format!("/admin/v1/tenants/{other_id}/models/{MODEL}"), &admin, None).await;
    assert_eq!(status, 200);
    let listed = |key: String| {
        let base = app.base.clone();
        async move {
            let list: Value =
                common::client().get(format!("{base}/v1/models")).bearer_auth(key).send().await.unwrap().json().await.unwrap();
            list["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
        }
    };
    assert!(!listed(app.key.clone()).await.contains(&MODEL.to_owned()));
    assert!(listed(other_key.clone()).await.contains(&MODEL.to_owned()));
    let anonymous: Value = common::client().get(format!("{}/v1/models", app.base)).send().await.unwrap().json().await.unwrap();
    assert!(!anonymous.to_string().contains(MODEL));
    let (status, body, _) = app.post_json("/v1/chat/completions", &tiny()).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "model_not_found");
    assert_eq!(app.post_as(&other_key, "/v1/chat/completions", &tiny(), &[]).await.status(), 200);
}

/// Confinement limits actions, not just reads: a token confined to a tenant, whatever its roles, never
/// mints credit, changes model access, or touches the catalog or the workers — for its own tenant or
/// another — and nothing it tried changed a balance or wrote an audit entry. Only an unconfined admin
/// grants credit; finance reads the books but does not write them.
#[tokio::test]
async fn confined_tokens_never_mint_credit_change_access_or_touch_the_catalog() {
    let app = spawn_app().await;
    let other_id = common::grant(&app.db, "other", "1").await;
    let own = app.tenant_id;
    let confined = admin_token(&["ops", "finance", "admin"], Some(own));
    let balance = |id: uuid::Uuid| {
        let db = app.db.clone();
        async move { sqlx::query_scalar::<_, Decimal>("SELECT balance FROM tenants WHERE id = $1").bind(id).fetch_one(&db).await.unwrap() }
    };
    let (own_before, other_before) = (balance(own).await, balance(other_id).await);

    let model_change = json!({"output_price_per_mtok": "0", "workers": ["http://127.0.0.1:9"]});
    let new_model = json!({"id": "org/mine", "context_length": 2048, "input_price_per_mtok": "0", "output_price_per_mtok": "0"});
    let refused: Vec<(Method, String, Option<Value>)> = vec![
        (Method::POST, format!("/admin/v1/tenants/{own}/credits"), Some(json!({"amount": "1000000"}))),
        (Method::POST, format!("/admin/v1/tenants/{own}/credits"), Some(json!({"amount": "-1"}))),
        (Method::POST, format!("/admin/v1/tenants/{other_id}/credits"), Some(json!({"amount": "5"}))),
        (Method::PUT, format!("/admin/v1/tenants/{own}/models/{MODEL}"), None),
        (Method::DELETE, format!("/admin/v1/tenants/{own}/models/{MODEL}"), None),
        (Method::PUT, format!("/admin/v1/tenants/{other_id}/models/{MODEL}"), None),
        (Method::GET, "/admin/v1/models".into(), None),
        (Method::POST, "/admin/v1/models".into(), Some(new_model)),
        (Method::PATCH, format!("/admin/v1/models/{MODEL}"), Some(model_change)),
        (Method::GET, "/admin/v1/workers".into(), None),
        (Method::POST, "/admin/v1/tenants".into(), Some(json!({"name": "spawned"}))),
        (Method::GET, "/admin/v1/audit-log".into(), None),
    ];
    for (method, path, body) in &refused {
        let (status, answer) = app.admin(method.clone(), path, &confined, body.as_ref()).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert_eq!(answer["error"]["code"], "insufficient_role", "{method} {path}: {answer}");
        assert!(!answer.to_string().contains(&other_id.to_string()), "a refusal never names another tenant: {answer}");
    }
    // An unconfined finance token reads the books but cannot write them.
    let finance = admin_token(&["finance"], None);
    let (status, answer) =
        app.admin(Method::POST, &format!("/admin/v1/tenants/{own}/credits"), &finance, Some(&json!({"amount": "1"}))).await;
    assert_eq!(status, 403, "{answer}");

    assert_eq!(balance(own).await, own_before, "no credit was minted");
    assert_eq!(balance(other_id).await, other_before);
    let audit: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE actor <> 'test'").fetch_one(&app.db).await.unwrap();
    assert_eq!(audit, 0, "nothing changed, so nothing was audited");
    let catalog: (Decimal, i64) =
        sqlx::query_as("SELECT output_price_per_mtok, (SELECT count(*) FROM model_workers WHERE model_id = $1) FROM models WHERE id = $1")
            .bind(MODEL)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(catalog, ("0.30".parse().unwrap(), 1), "the catalog is untouched");
    let access: i64 = sqlx::query_scalar("SELECT count(*) FROM model_access").fetch_one(&app.db).await.unwrap();
    assert_eq!(access, 0);

    // What a confined token may still do: read its own tenant and manage its own keys.
    let (status, tenant) = app.admin(Method::GET, &format!("/admin/v1/tenants/{own}"), &confined, None).await;
    assert_eq!((status, tenant["id"].as_str()), (200, Some(own.to_string().as_str())));
    let (status, key) = app.admin(Method::POST, &format!("/admin/v1/tenants/{own}/keys"), &confined, Some(&json!({"name": "ci"}))).await;
    assert_eq!(status, 200, "{key}");
    let (status, _) = app.admin(Method::POST, &format!("/admin/v1/tenants/{other_id}/keys"), &confined, Some(&json!({"name": "x"}))).await;
    assert_eq!(status, 404, "another tenant does not exist for it");
    // And an unconfined admin mints credit.
    let admin = admin_token(&["admin"], None);
    let (status, granted) =
        app.admin(Method::POST, &format!("/admin/v1/tenants/{own}/credits"), &admin, Some(&json!({"amount": "1"}))).await;
    assert_eq!(status, 200, "{granted}");
}

/// The CSV export is streamed page by page (no `Content-Length`: the body is not built in memory first),
/// and still exact: 5,500 records sharing one timestamp, across page boundaries (1,000 per query) broken
/// only by request id, each exported exactly once, in order, summing to the total.
#[tokio::test]
async fn a_large_csv_export_is_streamed_and_exact() {
    let app = spawn_app().await;
    let key_id: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM api_keys WHERE tenant_id = $1").bind(app.tenant_id).fetch_one(&app.db).await.unwrap();
    const ROWS: i64 = 5500;
    sqlx::query(
        "INSERT INTO cost_records (request_id, tenant_id, api_key_id, model, endpoint, input_tokens, output_tokens, cost, status,
                                   http_status, latency_ms)
         SELECT 'bulk-' || lpad(i::text, 6, '0'), $1, $2, $3, 'chat.completions', i, 1, i * 0.0000001, 'succeeded', 200, 1
         FROM generate_series(1, $4) AS i",
    )
    .bind(app.tenant_id)
    .bind(key_id)
    .bind(MODEL)
    .bind(ROWS)
    .execute(&app.db)
    .await
    .unwrap();
    let finance = admin_token(&["finance"], None);
    let response = common::client()
        .get(format!("{}/admin/v1/cost-records?tenant_id={}&format=csv", app.base, app.tenant_id))
        .bearer_auth(&finance)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("content-length").is_none(), "streamed, not buffered: {:?}", response.headers());
    assert_eq!(response.headers()["transfer-encoding"], "chunked");
    let csv = response.text().await.unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let (id_col, cost_col) = (header.iter().position(|h| *h == "request_id").unwrap(), header.iter().position(|h| *h == "cost").unwrap());
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), usize::try_from(ROWS).unwrap());
    let expected: Vec<String> = (1..=ROWS).map(|i| format!("bulk-{i:06}")).collect();
    let ids: Vec<&str> = rows.iter().map(|r| r[id_col]).collect();
    assert_eq!(ids, expected, "every record once, in order");
    let sum: Decimal = rows.iter().map(|r| r[cost_col].parse::<Decimal>().unwrap()).sum();
    assert_eq!(sum, Decimal::from(ROWS * (ROWS + 1) / 2) * Decimal::new(1, 7));
}

/// The entries of an audit-log page made through the admin API by the tests' tokens (subject `tester`),
/// not by the harness setting up tenants and models (actor `test`).
fn by_tester(page: &Value) -> Vec<&Value> {
    page["data"].as_array().unwrap().iter().filter(|e| e["actor"] != "test").inspect(|e| assert_eq!(e["actor"], "tester")).collect()
}
