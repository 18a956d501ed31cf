//! The gateway binary's subcommands that change the books (`grant-credits`, `create-key`,
//! `upsert-model`, `set-tenant-caps`) go through the same operations as the admin API: the same checks, one transaction,
//! and an audit row with actor `cli` that records the state before the change.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};

use rust_decimal::Decimal;
use serde_json::Value;
use sqlx::PgPool;

/// A fresh, migrated database, and its URL.
async fn database() -> (PgPool, String) {
    let name = format!("runaii_test_{}", uuid::Uuid::now_v7().simple());
    let admin = PgPool::connect("postgres://postgres@127.0.0.1:5432/postgres").await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.unwrap();
    let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
    let db = PgPool::connect(&url).await.unwrap();
    runaii_gateway::db::MIGRATOR.run(&db).await.unwrap();
    (db, url)
}

fn gateway(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runaii-gateway")).args(args).env("DATABASE_URL", url).env("RUST_LOG", "warn").output().unwrap()
}

async fn audit_rows(db: &PgPool) -> Vec<(String, String, Option<Value>, Option<Value>)> {
    sqlx::query_as("SELECT actor, action, before, after FROM audit_log ORDER BY id").fetch_all(db).await.unwrap()
}

#[tokio::test]
async fn grants_from_the_command_line_are_checked_and_audited() {
    let (db, url) = database().await;
    // What the admin API refuses, the command line refuses: nothing rounded, nothing written.
    for amount in ["0", "0.00000000000000001", "1000000000000"] {
        let out = gateway(&url, &["grant-credits", "--tenant", "acme", "--amount", amount]);
        assert!(!out.status.success(), "{amount} was granted: {}", String::from_utf8_lossy(&out.stdout));
        assert!(String::from_utf8_lossy(&out.stderr).contains("amount must be non-zero"), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let balances: Vec<Decimal> = sqlx::query_scalar("SELECT balance FROM tenants").fetch_all(&db).await.unwrap();
    assert!(balances.iter().all(Decimal::is_zero), "no money moved: {balances:?}");

    for amount in ["2.5", "-0.5"] {
        let out = gateway(&url, &["grant-credits", "--tenant", "acme", "--amount", amount, "--note", "by hand"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let grants: Vec<_> = audit_rows(&db).await.into_iter().filter(|r| r.1 == "credits.grant").collect();
    assert_eq!(grants.len(), 2);
    assert!(grants.iter().all(|r| r.0 == "cli"), "the command line audits as `cli`");
    let (_, _, before, after) = &grants[1];
    assert_eq!(before.as_ref().unwrap()["balance"], "2.5", "the balance before the change is recorded");
    assert_eq!(after.as_ref().unwrap()["balance"], "2");
    assert_eq!(after.as_ref().unwrap()["grant"]["note"], "by hand");
}

#[tokio::test]
async fn catalog_changes_from_the_command_line_are_checked_and_audited() {
    let (db, url) = database().await;
    let upsert = |price: &str| {
        gateway(
            &url,
            &["upsert-model", "--id", "cli-model", "--context-length", "2048", &format!("--input-price={price}"), "--output-price", "1"],
        )
    };
    let refused = upsert("-1");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("price per million tokens"), "{}", String::from_utf8_lossy(&refused.stderr));
    let rounded = upsert("0.00000000001");
    assert!(!rounded.status.success(), "a price the catalog would round is refused");
    let models: i64 = sqlx::query_scalar("SELECT count(*) FROM models").fetch_one(&db).await.unwrap();
    assert_eq!(models, 0);

    assert!(upsert("0.5").status.success());
    let out = gateway(
        &url,
        &[
            "upsert-model",
            "--id",
            "cli-model",
            "--context-length",
            "4096",
            "--input-price",
            "0.5",
            "--output-price",
            "1",
            "--worker-url",
            "http://10.0.0.7:8081",
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = audit_rows(&db).await;
    let actions: Vec<(&str, &str)> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(actions, [("cli", "model.create"), ("cli", "model.update")]);
    assert_eq!(rows[1].2.as_ref().unwrap()["context_length"], 2048);
    assert_eq!(rows[1].3.as_ref().unwrap()["context_length"], 4096);
    assert_eq!(rows[1].3.as_ref().unwrap()["workers"], serde_json::json!(["http://10.0.0.7:8081"]));

    let key = gateway(&url, &["create-key", "--tenant", "acme", "--name", "ci"]);
    assert!(key.status.success());
    let secret = String::from_utf8_lossy(&key.stdout).trim().to_owned();
    let rows = audit_rows(&db).await;
    let created = rows.iter().find(|r| r.1 == "key.create").expect("the key is audited");
    assert_eq!(created.0, "cli");
    assert!(!created.3.as_ref().unwrap().to_string().contains(&secret), "the secret is never audited");
    assert!(rows.iter().any(|r| r.0 == "cli" && r.1 == "tenant.create"), "a tenant the command line creates is audited too");
}

#[tokio::test]
async fn tenant_caps_from_the_command_line_are_checked_and_audited() {
    let (db, url) = database().await;
    let out = gateway(&url, &["grant-credits", "--tenant", "acme", "--amount", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = gateway(&url, &["set-tenant-caps", "--tenant", "acme", "--monthly-spend-cap", "-1"]);
    assert!(!out.status.success(), "a negative cap was set");
    let out = gateway(&url, &["set-tenant-caps", "--tenant", "acme", "--rpm-limit", "60", "--monthly-spend-cap", "25.50"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "tenant acme: rpm_limit 60, tpm_limit none, monthly_spend_cap 25.5, max_concurrent_requests 32"
    );
    let out = gateway(&url, &["set-tenant-caps", "--tenant", "acme", "--max-concurrent-requests", "0"]);
    assert!(!out.status.success(), "a cap in flight of 0 was set");
    let out = gateway(&url, &["set-tenant-caps", "--tenant", "acme", "--rpm-limit", "none"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let caps: Vec<_> = audit_rows(&db).await.into_iter().filter(|r| r.1 == "tenant.caps").collect();
    assert_eq!(caps.len(), 2);
    let (actor, _, before, after) = &caps[1];
    assert_eq!(actor, "cli");
    assert_eq!((&before.as_ref().unwrap()["rpm_limit"], &after.as_ref().unwrap()["rpm_limit"]), (&Value::from(60), &Value::Null));
    assert_eq!(after.as_ref().unwrap()["monthly_spend_cap"], "25.5", "left alone");
}
