//! Credits on real Postgres: every request holds its worst case at admission and settles to its cost;
//! no interleaving of concurrent requests overdraws a tenant, and the ledger explains every balance.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{create_key, grant, spawn_app, MODEL};
use rust_decimal::Decimal;
use serde_json::{json, Value};

fn small_request() -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 16, "temperature": 0})
}

#[tokio::test]
async fn concurrent_requests_never_overdraw_and_the_ledger_explains_the_balance() {
    // Three replicas on one database, the requests spread over them: leases and holds of every replica
    // together stay within the balance. Each gets the pool a production replica has.
    let pool = |s: &mut runaii_gateway::config::Settings| s.db.db_max_connections = 16;
    let app = common::spawn_app_with(pool).await;
    let bases = [app.base.clone(), common::spawn_replica(&app, pool).await, common::spawn_replica(&app, pool).await];
    let tenant = "small-balance";
    let key = create_key(&app.db, tenant).await;
    // Worst case of one request ≈ 0.00004 USD (a ~370-token prompt bound and 16 output tokens); the
    // actual cost is about a fifth of that. This balance admits two requests at a time and, in all,
    // about a dozen.
    let granted: Decimal = "0.0001".parse().unwrap();
    let tenant_id = grant(&app.db, tenant, "0.0001").await;

    let sends = (0..24).map(|i| {
        let (app_key, req) = (key.clone(), small_request());
        let base = bases[i % bases.len()].clone();
        async move {
            let r = common::client().post(format!("{base}/v1/chat/completions")).bearer_auth(&app_key).json(&req).send().await.unwrap();
            let status = r.status().as_u16();
            let retry = r.headers().get("x-should-retry").map(|v| v.to_str().unwrap().to_owned());
            (status, retry, r.json::<Value>().await.unwrap())
        }
    });
    let results = futures::future::join_all(sends).await;
    let ok = results.iter().filter(|r| r.0 == 200).count();
    let refused: Vec<_> = results.iter().filter(|r| r.0 == 402).collect();
    assert!(ok >= 2, "some requests fit the balance: {results:?}");
    assert!(!refused.is_empty(), "the balance cannot cover 24 worst cases at once");
    assert_eq!(ok + refused.len(), results.len(), "only 200 or 402: {results:?}");
    for (_, retry, body) in &refused {
        assert_eq!(body["error"]["code"], "insufficient_credits");
        assert_eq!(retry.as_deref(), Some("false"), "the SDKs must not retry a 402");
    }

    let (balance, reserved): (Decimal, Decimal) =
        sqlx::query_as("SELECT balance, reserved FROM tenants WHERE id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    let (records, spent): (i64, Option<Decimal>) = sqlx::query_as("SELECT count(*), sum(cost) FROM cost_records WHERE tenant_id = $1")
        .bind(tenant_id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    let ledger: Decimal =
        sqlx::query_scalar("SELECT sum(amount) FROM credit_ledger WHERE tenant_id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    let holds: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_holds").fetch_one(&app.db).await.unwrap();
    assert_eq!(records, i64::try_from(ok).unwrap(), "one record per admitted request; refusals have none");
    assert!(balance >= Decimal::ZERO);
    assert_eq!(reserved, Decimal::ZERO, "every hold was settled (a balance this small gets no lease)");
    assert_eq!(holds, 0);
    assert_eq!(balance, granted - spent.unwrap(), "balance = grants - sum of cost records");
    assert_eq!(balance, ledger, "the ledger's sum is the balance");
    // What each answer said it cost is what its record holds.
    for (_, _, body) in results.iter().filter(|r| r.0 == 200) {
        let id = body["id"].as_str().unwrap();
        let cost: Decimal =
            sqlx::query_scalar("SELECT cost FROM cost_records WHERE request_id = $1").bind(id).fetch_one(&app.db).await.unwrap();
        let said: Decimal = serde_json::to_string(&body["usage"]["cost"]).unwrap().parse().unwrap();
        assert_eq!(said, cost.normalize());
    }
}

#[tokio::test]
async fn a_tenant_without_credit_gets_402_and_pays_nothing() {
    let app = spawn_app().await;
    let key = create_key(&app.db, "broke").await;
    let r = app.post_as(&key, "/v1/chat/completions", &small_request(), &[]).await;
    assert_eq!(r.status(), 402);
    assert_eq!(r.headers()["x-should-retry"], "false");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "insufficient_credits");
    assert!(body["error"]["message"].as_str().unwrap().contains("0 USD is available"), "{body}");
    assert!(app.cost_rows().await.is_empty());

    // The key's holder sees its own balance and month, and nobody else's.
    let account: Value =
        common::client().get(format!("{}/v1/account", app.base)).bearer_auth(&key).send().await.unwrap().json().await.unwrap();
    assert_eq!(account["tenant"]["name"], "broke");
    assert_eq!(account["balance"], "0");
    assert_eq!(account["usage"]["requests"], 0);
}

#[tokio::test]
async fn account_shows_balance_and_this_months_usage() {
    let app = spawn_app().await;
    let (status, body, _) = app.post_json("/v1/chat/completions", &small_request()).await;
    assert_eq!(status, 200, "{body}");
    let account: Value =
        common::client().get(format!("{}/v1/account", app.base)).bearer_auth(&app.key).send().await.unwrap().json().await.unwrap();
    let cost: Decimal = serde_json::to_string(&body["usage"]["cost"]).unwrap().parse().unwrap();
    let expected_balance = common::TEST_CREDIT.parse::<Decimal>().unwrap() - cost;
    assert_eq!(account["balance"].as_str().unwrap().parse::<Decimal>().unwrap(), expected_balance);
    assert_eq!(account["available"], account["balance"]);
    assert_eq!(account["usage"]["requests"], 1);
    assert_eq!(account["usage"]["cost"].as_str().unwrap().parse::<Decimal>().unwrap(), cost);
    assert_eq!(account["tenant"]["name"], app.tenant.as_str());
}

#[tokio::test]
async fn money_tables_are_append_only() {
    let app = spawn_app().await;
    let (status, _, _) = app.post_json("/v1/chat/completions", &small_request()).await;
    assert_eq!(status, 200);
    sqlx::query("INSERT INTO audit_log (actor, action, target_type, target_id) VALUES ('t', 'test', 'none', '-')")
        .execute(&app.db)
        .await
        .unwrap();
    for sql in
        ["UPDATE cost_records SET cost = 0", "DELETE FROM cost_records", "DELETE FROM credit_ledger", "UPDATE audit_log SET actor = 'x'"]
    {
        let err = sqlx::query(sql).execute(&app.db).await.expect_err(sql);
        assert!(err.to_string().contains("append-only"), "{sql}: {err}");
    }
    let overdraw = sqlx::query("UPDATE tenants SET reserved = balance + 1").execute(&app.db).await;
    assert!(overdraw.is_err(), "the database itself refuses reserving more than the balance");
}

/// With enough credit every replica leases a slice and holds against it in memory; whatever each
/// replica held, the books close: one record per request, balance = grants − their costs, the ledger's
/// sum is the balance, no hold is left, and what is still reserved is exactly what is leased.
#[tokio::test]
async fn requests_held_against_leases_on_three_replicas_reconcile() {
    // Three replicas contend for one tenant's row: each gets the pool a production replica has.
    let pool = |s: &mut runaii_gateway::config::Settings| s.db.db_max_connections = 16;
    let app = common::spawn_app_with(pool).await;
    let bases = [app.base.clone(), common::spawn_replica(&app, pool).await, common::spawn_replica(&app, pool).await];
    let key = create_key(&app.db, "well-funded").await;
    let tenant_id = grant(&app.db, "well-funded", "10").await;
    // A first request on each replica holds exactly and makes it lease a slice.
    for base in &bases {
        let r = common::client().post(format!("{base}/v1/chat/completions")).bearer_auth(&key).json(&small_request()).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    let leases = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM credit_leases WHERE tenant_id = $1 AND amount > 0")
            .bind(tenant_id)
            .fetch_one(&app.db)
            .await
            .unwrap()
    };
    let started = std::time::Instant::now();
    while leases().await < 3 {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "every replica leases a slice");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let leased_holds = || runaii_gateway::metrics::global().credit_holds.get(&["lease"]);
    let before = leased_holds();
    let sends = (0..24).map(|i| {
        let (key, req, base) = (key.clone(), small_request(), bases[i % bases.len()].clone());
        async move {
            let r = common::client().post(format!("{base}/v1/chat/completions")).bearer_auth(&key).json(&req).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    });
    let results = futures::future::join_all(sends).await;
    assert!(results.iter().all(|r| r.0 == 200), "{results:?}");
    assert!(leased_holds() - before >= 24, "the second wave held against the leases, in memory");
    let (balance, reserved): (Decimal, Decimal) =
        sqlx::query_as("SELECT balance, reserved FROM tenants WHERE id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    let (records, spent): (i64, Decimal) = sqlx::query_as("SELECT count(*), sum(cost) FROM cost_records WHERE tenant_id = $1")
        .bind(tenant_id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    let ledger: Decimal =
        sqlx::query_scalar("SELECT sum(amount) FROM credit_ledger WHERE tenant_id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    let leased: Decimal = sqlx::query_scalar("SELECT COALESCE(sum(amount), 0) FROM credit_leases WHERE tenant_id = $1")
        .bind(tenant_id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    let holds: i64 =
        sqlx::query_scalar("SELECT count(*) FROM credit_holds WHERE tenant_id = $1").bind(tenant_id).fetch_one(&app.db).await.unwrap();
    assert_eq!(records, 27);
    assert_eq!(balance, Decimal::from(10) - spent);
    assert_eq!(ledger, balance);
    assert_eq!(holds, 0);
    assert!(leased > Decimal::ZERO, "the replicas leased credit");
    assert_eq!(reserved, leased, "nothing is reserved but the leases");
    for (_, body) in &results {
        let cost: Decimal = sqlx::query_scalar("SELECT cost FROM cost_records WHERE request_id = $1")
            .bind(body["id"].as_str().unwrap())
            .fetch_one(&app.db)
            .await
            .unwrap();
        let said: Decimal = serde_json::to_string(&body["usage"]["cost"]).unwrap().parse().unwrap();
        assert_eq!(said, cost.normalize(), "what each answer said it cost is its record");
    }
}
