//! `runaii models`, `usage`, `keys` and `completions`, as people read them and as scripts do
//! (`--output json`); and the quickstart's key found with no flags.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::run::usage_lines;
use crate::stack::{db, runaii, runtime, scratch_dir, stack};
use runaii_testkit::MODEL;

fn json(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn models_lists_readiness_context_and_exact_prices() {
    let text = runaii(&["models"]).run();
    assert_eq!(text.code, 0, "{}", text.stderr);
    let row = text.stdout.lines().find(|l| l.starts_with(MODEL)).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells, [MODEL, "yes", "4096", "0.1", "0.3", "json_schema,tools"]);

    let scripted = runaii(&["models", "--output", "json"]).env_remove("RUNAII_API_KEY").run();
    assert_eq!(scripted.code, 0, "public models need no key: {}", scripted.stderr);
    let catalog = json(&scripted.stdout);
    assert_eq!(catalog["data"][0]["id"], MODEL);
    assert_eq!(catalog["data"][0]["pricing"]["input_per_million_tokens"], "0.1");
}

#[test]
fn usage_shows_the_account_and_with_an_admin_token_recent_requests() {
    let made = runaii(&["run", MODEL, "Say ok.", "--max-tokens", "4", "-v"]).run();
    let request_id = usage_lines(&made.stderr)[0].0.clone();

    let text = runaii(&["usage"]).run();
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("tenant      cli-tests") && text.stdout.contains("balance"), "{}", text.stdout);
    assert!(text.stderr.contains("need an admin token"), "{}", text.stderr);

    let scripted = runaii(&["usage", "--output", "json", "--recent", "1000"]).env("RUNAII_ADMIN_TOKEN", &stack().admin_token).run();
    assert_eq!(scripted.code, 0, "{}", scripted.stderr);
    let usage = json(&scripted.stdout);
    let pool = db();
    let balance: rust_decimal::Decimal =
        runtime().block_on(sqlx::query_scalar("SELECT balance FROM tenants WHERE name = 'cli-tests'").fetch_one(&pool)).unwrap();
    // Other tests spend concurrently: the balance is read after, so it can only be lower or equal.
    let shown: rust_decimal::Decimal = usage["account"]["balance"].as_str().unwrap().parse().unwrap();
    assert!(shown >= balance, "{shown} vs {balance}");
    let recent = usage["recent_requests"].as_array().unwrap();
    assert!(recent.iter().any(|r| r["request_id"] == request_id.as_str()), "{request_id} among the recent requests");
}

#[test]
fn keys_need_an_admin_token_and_manage_the_tenants_keys() {
    let refused = runaii(&["keys"]).run();
    assert_eq!(refused.code, 6, "{}", refused.stderr);
    assert!(refused.stderr.contains("admin API"), "{}", refused.stderr);

    let admin = &stack().admin_token;
    let created = runaii(&["keys", "create", "--name", "from-the-cli"]).env("RUNAII_ADMIN_TOKEN", admin).run();
    assert_eq!(created.code, 0, "{}", created.stderr);
    let secret = created.stdout.trim().to_owned();
    assert!(secret.starts_with("rk-") && created.stdout.lines().count() == 1, "the secret alone on stdout: {:?}", created.stdout);
    assert_eq!(runaii(&["usage"]).env("RUNAII_API_KEY", &secret).run().code, 0, "the new key works");

    let listed = runaii(&["keys", "list", "--output", "json"]).env("RUNAII_ADMIN_TOKEN", admin).run();
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let keys = json(&listed.stdout);
    let key = keys["data"].as_array().unwrap().iter().find(|k| k["name"] == "from-the-cli").unwrap().clone();
    assert!(secret.starts_with(&format!("rk-{}-", key["public_id"].as_str().unwrap())), "{key}");

    let revoked = runaii(&["keys", "revoke", key["id"].as_str().unwrap()]).env("RUNAII_ADMIN_TOKEN", admin).run();
    assert_eq!(revoked.code, 0, "{}", revoked.stderr);
    // Revocation reaches the gateway's key cache within its 300 ms.
    let deadline = Instant::now() + Duration::from_secs(10);
    while runaii(&["usage"]).env("RUNAII_API_KEY", &secret).run().code != 6 {
        assert!(Instant::now() < deadline, "the revoked key still works");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_quickstart_key_works_with_no_flags() {
    let checkout = scratch_dir("checkout");
    std::fs::create_dir_all(checkout.join(".data")).unwrap();
    std::fs::write(checkout.join(".data/demo-api-key"), format!("{}\n", stack().key)).unwrap();
    let subdir = checkout.join("docs");
    std::fs::create_dir_all(&subdir).unwrap();
    let run = runaii(&["usage", "--output", "json"]).env_remove("RUNAII_API_KEY").current_dir(&subdir).run();
    assert_eq!(run.code, 0, "the key in .data/demo-api-key of a parent directory: {}", run.stderr);
    assert_eq!(json(&run.stdout)["account"]["tenant"]["name"], "cli-tests");
}

#[test]
fn shell_completions() {
    for shell in ["bash", "zsh", "fish"] {
        let run = runaii(&["completions", shell]).run();
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(run.stdout.contains("runaii") && run.stdout.contains("json-schema"), "{shell}");
    }
}
