//! Staff tokens on the real gateway: `iss` and `aud` checked, a maximum lifetime, several keys accepted
//! at once (rotation with overlap, `kid` picking the key), and revocation by `jti` through the admin API
//! and the command line, reaching another replica within a second.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{admin_token, client, spawn_app_with, spawn_replica, TestApp, ADMIN_SECRET};
use reqwest::Method;
use runaii_gateway::admin::Claims;
use runaii_gateway::auth::staff::{issue, issue_as, DEFAULT_AUDIENCE, DEFAULT_ISSUER};
use serde_json::json;

async fn tenants_status(base: &str, token: &str) -> u16 {
    client().get(format!("{base}/admin/v1/tenants")).bearer_auth(token).send().await.unwrap().status().as_u16()
}

fn ops(lifetime_s: u64) -> Claims {
    Claims::new("someone", vec!["ops".into(), "admin".into()], None, lifetime_s)
}

#[tokio::test]
async fn issuer_audience_and_lifetime_are_checked() {
    let app = spawn_app_with(|s| s.admin.admin_jwt_max_lifetime_hours = 1).await;
    assert_eq!(tenants_status(&app.base, &issue(ADMIN_SECRET, &ops(3600)).unwrap()).await, 200);
    assert_eq!(tenants_status(&app.base, &issue_as(ADMIN_SECRET, &ops(60), "elsewhere", DEFAULT_AUDIENCE).unwrap()).await, 401);
    assert_eq!(tenants_status(&app.base, &issue_as(ADMIN_SECRET, &ops(60), DEFAULT_ISSUER, "another-api").unwrap()).await, 401);
    assert_eq!(tenants_status(&app.base, &issue(ADMIN_SECRET, &ops(3600 + 120)).unwrap()).await, 401, "longer than an hour");
    let mut no_jti = ops(60);
    no_jti.jti = None;
    assert_eq!(tenants_status(&app.base, &issue(ADMIN_SECRET, &no_jti).unwrap()).await, 401);
    let mut no_iat = ops(60);
    no_iat.iat = None;
    let response =
        client().get(format!("{}/admin/v1/tenants", app.base)).bearer_auth(issue(ADMIN_SECRET, &no_iat).unwrap()).send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.text().await.unwrap().contains("iat"));
}

#[tokio::test]
async fn two_keys_are_accepted_during_a_rotation() {
    let old = "the-old-admin-secret-of-at-least-32-bytes";
    let new = "the-new-admin-secret-of-at-least-32-bytes";
    let file = std::env::temp_dir().join(format!("runaii-admin-secrets-{}", uuid::Uuid::now_v7()));
    std::fs::write(&file, format!("{new}\n{old}\n")).unwrap();
    let path = file.clone();
    let app = spawn_app_with(move |s| {
        s.admin.admin_jwt_secret = None;
        s.admin.admin_jwt_secret_file = Some(path);
    })
    .await;
    assert_eq!(tenants_status(&app.base, &issue(old, &ops(600)).unwrap()).await, 200);
    assert_eq!(tenants_status(&app.base, &issue(new, &ops(600)).unwrap()).await, 200);
    assert_eq!(tenants_status(&app.base, &issue(ADMIN_SECRET, &ops(600)).unwrap()).await, 401, "a key not configured");
    std::fs::remove_file(file).unwrap();
}

async fn refused_within(base: &str, token: &str, bound: Duration) -> Duration {
    let started = Instant::now();
    while tenants_status(base, token).await != 401 {
        assert!(started.elapsed() < Duration::from_secs(10), "the revoked token still works after 10 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    assert!(took < bound, "refused after {took:?}");
    took
}

async fn revoke(app: &TestApp, jti: &str) -> (u16, serde_json::Value) {
    app.admin(Method::POST, "/admin/v1/admin-token-revocations", &admin_token(&["admin"], None), Some(&json!({"jti": jti}))).await
}

#[tokio::test]
async fn a_revoked_token_is_refused_on_every_replica_within_a_second() {
    let app = spawn_app_with(|_| {}).await;
    let other = spawn_replica(&app, |_| {}).await;
    // The other replica's listener connects in the background: let it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let claims = ops(600);
    let token = issue(ADMIN_SECRET, &claims).unwrap();
    let jti = claims.jti.clone().unwrap();
    assert_eq!(tenants_status(&other, &token).await, 200);

    let (status, body) = revoke(&app, &jti).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["jti"], jti.as_str());
    refused_within(&other, &token, Duration::from_secs(1)).await;
    assert_eq!(tenants_status(&app.base, &token).await, 401);
    // Revoking again answers the first revocation; a confined admin may not revoke.
    let (status, again) = revoke(&app, &jti).await;
    assert_eq!((status, &again["revoked_at"]), (200, &body["revoked_at"]));
    let confined = admin_token(&["admin"], Some(app.tenant_id));
    let (status, _) = app.admin(Method::POST, "/admin/v1/admin-token-revocations", &confined, Some(&json!({"jti": "x"}))).await;
    assert_eq!(status, 403);
    let audited: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'admin_token.revoke' AND target_id = $1")
        .bind(&jti)
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(audited, 1);

    // A replica started after the revocation loads the list.
    let late = spawn_replica(&app, |_| {}).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(tenants_status(&late, &token).await, 401);

    // The command line mints what the gateway accepts (the quickstart's 30-day token included), and
    // revokes too.
    let token = cli(&app, &["issue-admin-token", "--admin-jwt-secret", ADMIN_SECRET, "--ttl-hours", "720"]);
    assert_eq!(tenants_status(&other, &token).await, 200);
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    validation.set_audience(&[DEFAULT_AUDIENCE]);
    let key = jsonwebtoken::DecodingKey::from_secret(ADMIN_SECRET.as_bytes()).unwrap();
    let claims = jsonwebtoken::decode::<Claims>(&token, &key, &validation).unwrap().claims;
    cli(&app, &["revoke-admin-token", "--jti", claims.jti.as_deref().unwrap()]);
    refused_within(&other, &token, Duration::from_secs(1)).await;
}

/// Runs the gateway's command line against the app's database; its output, trimmed.
fn cli(app: &TestApp, args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_runaii-gateway"))
        .args(args)
        .env("DATABASE_URL", app.database_url())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}
