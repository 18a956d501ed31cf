//! Test harness: a real worker process on the embedded model (one per test binary), and for each test a
//! fresh Postgres database, migrated, with the real gateway built on port 0.

#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use runaii_gateway::config::{
    AdminArgs, BatchArgs, DbArgs, FileArgs, FileStore, LimitArgs, ResponseStoreArgs, S3Args, Settings, WorkerArgs,
};
use runaii_gateway::db::models::ModelChange;
use runaii_gateway::ops::{self, Actor};
use runaii_gateway::ratelimit::RedisFailure;
use runaii_gateway::Application;
use serde_json::{json, Value};
use sqlx::PgPool;

use runaii_testkit::s3::S3Server;
use runaii_testkit::WorkerProcess;
pub use runaii_testkit::{invoice_request, invoice_schema, worker_bearer, MODEL, WORKER_SECRET};

/// The machine's Postgres server; each test gets its own database on it.
const POSTGRES: &str = "postgres://postgres@127.0.0.1:5432";

/// The worker binary cargo built next to this test binary.
fn worker_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(|deps| deps.parent()).unwrap().join("runaii-worker");
    assert!(path.exists(), "{} missing: build the workspace (cargo test --workspace)", path.display());
    path
}

/// The shared worker of this test binary, started on first use; it exits with this process.
pub fn worker() -> &'static WorkerProcess {
    static WORKER: OnceLock<WorkerProcess> = OnceLock::new();
    WORKER.get_or_init(|| start_worker(&[]))
}

pub fn start_worker(extra: &[&str]) -> WorkerProcess {
    runaii_testkit::start_worker(&worker_binary(), extra)
}

/// The S3 server of this test binary (Ceph's radosgw), started on first use; it stops with this process.
pub fn s3() -> &'static S3Server {
    static S3: OnceLock<S3Server> = OnceLock::new();
    S3.get_or_init(S3Server::start)
}

/// Makes `settings` keep files' bytes in `server`'s bucket, under a prefix of their own; the prefix.
pub fn store_files_in(settings: &mut Settings, server: &S3Server) -> String {
    let prefix = format!("test-{}", uuid::Uuid::now_v7().simple());
    settings.files.store = FileStore::S3 { bucket: server.bucket.clone(), prefix: prefix.clone() };
    settings.files.s3 = S3Args {
        endpoint: Some(server.endpoint.clone()),
        region: None,
        access_key_id: Some(server.access_key_id.clone()),
        secret_access_key: Some(server.secret_access_key.as_str().into()),
    };
    prefix
}

/// The names of the objects under `prefix` in `server`'s bucket, sorted: what a gateway kept there.
pub async fn s3_objects(server: &S3Server, prefix: &str) -> Vec<String> {
    use futures::TryStreamExt as _;
    use object_store::ObjectStore as _;
    let store = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&server.endpoint)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_bucket_name(&server.bucket)
        .with_access_key_id(&server.access_key_id)
        .with_secret_access_key(&server.secret_access_key)
        .build()
        .unwrap();
    let prefix = object_store::path::Path::from(prefix);
    let mut names: Vec<String> = store.list(Some(&prefix)).map_ok(|o| o.location.to_string()).try_collect().await.unwrap();
    names.sort();
    names
}

pub struct TestApp {
    pub base: String,
    pub db: PgPool,
    pub key: String,
    pub tenant: String,
    pub tenant_id: uuid::Uuid,
    /// The private metrics listener, when the test configured one.
    pub metrics_base: Option<String>,
    database_url: String,
}

/// The admin JWT secret of test gateways.
pub const ADMIN_SECRET: &str = "test-admin-secret-of-at-least-32-bytes!";

/// Credit every test tenant starts with, in USD: far more than a test spends.
pub const TEST_CREDIT: &str = "100";

/// Gateway settings a test may change before [`spawn_app_with`] builds it.
pub fn test_settings(database_url: String) -> Settings {
    Settings {
        db: DbArgs { database_url: database_url.into(), db_max_connections: 4 },
        redis_url: "redis://127.0.0.1:6379".into(),
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: None,
        max_body_bytes: 1024 * 1024,
        body_read_timeout_ms: 10_000,
        client_write_timeout_ms: 30_000,
        header_read_timeout_ms: 30_000,
        key_cache_ms: 300,
        key_cache_entries: std::num::NonZeroUsize::new(100_000).unwrap(),
        // Tests send wrong keys on purpose; `gateway/tests/keys.rs` sets its own allowance.
        auth_failures_per_minute: std::num::NonZeroU32::new(100_000).unwrap(),
        probe_ms: 300,
        ledger_linger_us: 1000,
        limits: LimitArgs {
            default_rpm: 10_000,
            default_tpm: 10_000_000,
            on_redis_failure: RedisFailure::Local,
            idempotency_ttl_hours: 24,
            idempotency_max_stored_bytes: 8 * 1024 * 1024,
            idempotency_max_keys_per_tenant: 100_000,
            idempotency_max_bytes_per_tenant: 256 * 1024 * 1024,
            hold_expiry_s: 7200,
            max_request_s: 3600,
            replica_heartbeat_ms: 500,
            replica_timeout_ms: 30_000,
        },
        admin: AdminArgs { admin_jwt_secret: Some(ADMIN_SECRET.into()), ..AdminArgs::default() },
        workers: WorkerArgs {
            worker_secret_file: None,
            worker_secret: Some(runaii_testkit::WORKER_SECRET.into()),
            registry_refresh_ms: 200,
            worker_headers_timeout_ms: 300_000,
            worker_min_tokens_per_second: 5,
            worker_idle_timeout_ms: 60_000,
        },
        responses: ResponseStoreArgs::default(),
        files: FileArgs::default(),
        batches: BatchArgs { poll_ms: 100, ..BatchArgs::default() },
    }
}

/// A fresh database, migrated; the embedded model in the catalog served by the shared worker; a tenant
/// with a key and [`TEST_CREDIT`]; the gateway on a free port.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

pub async fn spawn_app_with(configure: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_app_on(POSTGRES, configure).await
}

/// As [`spawn_app_with`], on the Postgres server at `server` (`postgres://user@host:port`).
pub async fn spawn_app_on(server: &str, configure: impl FnOnce(&mut Settings)) -> TestApp {
    let name = format!("runaii_test_{}", uuid::Uuid::now_v7().simple());
    let admin = PgPool::connect(&format!("{server}/postgres")).await.expect("Postgres on 127.0.0.1:5432 (user postgres)");
    drop_old_databases(&admin).await;
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.unwrap();
    let url = format!("{server}/{name}");
    let db = PgPool::connect(&url).await.unwrap();
    runaii_gateway::db::MIGRATOR.run(&db).await.unwrap();
    let worker = worker();
    let price = |s: &str| s.parse().unwrap();
    upsert_model(&db, MODEL, (price("0.10"), price("0.30")), Some(&worker.url)).await;
    let tenant = format!("tenant-{}", uuid::Uuid::now_v7().simple());
    let key = create_key(&db, &tenant).await;
    let tenant_id = grant(&db, &tenant, TEST_CREDIT).await;

    let mut settings = test_settings(url.clone());
    configure(&mut settings);
    let app = Application::build(settings).await.unwrap();
    let base = format!("http://127.0.0.1:{}", app.port().unwrap());
    let metrics_base = app.metrics_port().map(|p| format!("http://127.0.0.1:{p}"));
    tokio::spawn(app.run());
    TestApp { base, db, key, tenant, tenant_id, metrics_base, database_url: url }
}

/// Another gateway replica on the same database (and Redis, and worker); its base URL.
pub async fn spawn_replica(app: &TestApp, configure: impl FnOnce(&mut Settings)) -> String {
    let mut settings = test_settings(app.database_url.clone());
    configure(&mut settings);
    let replica = Application::build(settings).await.unwrap();
    let base = format!("http://127.0.0.1:{}", replica.port().unwrap());
    tokio::spawn(replica.run());
    base
}

/// The first test of each binary drops the databases that runs at least an hour old left behind. Only
/// old ones: other test runs (another checkout's, a CI job) may be using theirs right now. The name's
/// UUIDv7 says when it was made.
async fn drop_old_databases(admin: &PgPool) {
    static ONCE: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    ONCE.get_or_init(|| async {
        let old: Vec<String> =
            sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'runaii_test_%'").fetch_all(admin).await.unwrap();
        let hour_ago = chrono::Utc::now().timestamp_millis() - 3_600_000;
        for db in old {
            let made_ms = db.strip_prefix("runaii_test_").and_then(|hex| hex.get(..12)).and_then(|ms| i64::from_str_radix(ms, 16).ok());
            if made_ms.is_some_and(|ms| ms > hour_ago) {
                continue;
            }
            // Names come from pg_database and match runaii_test_<hex>: safe to splice.
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)")).execute(admin).await;
        }
    })
    .await;
}

/// Who the harness is in the audit log.
const TEST_ACTOR: Actor<'static> = Actor("test");

/// Adds the model to the catalog, 4096 tokens long, at `(input, output)` USD per million tokens, or
/// changes it; with a worker URL that serves it.
pub async fn upsert_model(db: &PgPool, id: &str, (input, output): (rust_decimal::Decimal, rust_decimal::Decimal), worker: Option<&str>) {
    let change = ModelChange {
        context_length: Some(4096),
        input_price_per_mtok: Some(input),
        output_price_per_mtok: Some(output),
        ..ModelChange::default()
    };
    ops::catalog::upsert(db, TEST_ACTOR, id, change, worker).await.unwrap();
}

impl TestApp {
    /// The app's database, for the command line.
    pub fn database_url(&self) -> &str {
        &self.database_url
    }

    /// Adds or changes a catalog model as [`upsert_model`] does (as the command line would, from outside
    /// this replica), then waits until the gateway serves it with the new input price: changes reach a
    /// replica through Postgres notifications, within milliseconds.
    pub async fn upsert_model(&self, id: &str, (input, output): (rust_decimal::Decimal, rust_decimal::Decimal), worker: Option<&str>) {
        upsert_model(&self.db, id, (input, output), worker).await;
        let url = format!("{}/v1/models/{}", self.base, id.replace('/', "%2F"));
        let want = input.normalize().to_string();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let model: Value = reqwest::get(&url).await.unwrap().json().await.unwrap_or_default();
            if model["pricing"]["input_per_million_tokens"] == want.as_str() {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "the gateway did not see model {id} change within 5 s: {model}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

pub async fn create_key(db: &PgPool, tenant: &str) -> String {
    let tenant_id = ops::tenants::ensure(db, TEST_ACTOR, tenant).await.unwrap();
    let spec = ops::keys::KeySpec { name: "test".into(), ..Default::default() };
    ops::keys::create(db, TEST_ACTOR, tenant_id, &spec).await.unwrap().key
}

/// Grants `amount` USD to the tenant (created when missing); returns its id.
pub async fn grant(db: &PgPool, tenant: &str, amount: &str) -> uuid::Uuid {
    let tenant_id = ops::tenants::ensure(db, TEST_ACTOR, tenant).await.unwrap();
    ops::credits::grant(db, TEST_ACTOR, tenant_id, amount.parse().unwrap(), "").await.unwrap();
    tenant_id
}

/// An admin JWT signed with [`ADMIN_SECRET`].
/// A succeeded record of one prompt and one output token, with no hold (`leased: None`): for tests that
/// write cost records straight through `db::costs` or the ledger writer.
pub fn cost_record(
    request_id: &str,
    tenant_id: uuid::Uuid,
    api_key_id: uuid::Uuid,
    cost: rust_decimal::Decimal,
) -> runaii_gateway::db::costs::CostRecord {
    runaii_gateway::db::costs::CostRecord {
        request_id: request_id.into(),
        tenant_id,
        api_key_id,
        model: MODEL.into(),
        endpoint: "chat.completions",
        input_tokens: 1,
        cached_tokens: 0,
        output_tokens: 1,
        cost,
        status: "succeeded",
        http_status: 200,
        error_code: None,
        latency_ms: 1,
        leased: None,
    }
}

pub fn admin_token(roles: &[&str], tenant_id: Option<uuid::Uuid>) -> String {
    let claims = runaii_gateway::admin::Claims::new("tester", roles.iter().map(|r| (*r).to_owned()).collect(), tenant_id, 3600);
    runaii_gateway::admin::issue(ADMIN_SECRET, &claims).unwrap()
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(300)).build().unwrap()
}

impl TestApp {
    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        client().post(format!("{}{path}", self.base)).bearer_auth(&self.key).json(body).send().await.unwrap()
    }

    /// POST with another key and extra headers.
    pub async fn post_as(&self, key: &str, path: &str, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut request = client().post(format!("{}{path}", self.base)).bearer_auth(key).json(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.unwrap()
    }

    /// An admin API call with a JWT; returns status and JSON body.
    pub async fn admin(&self, method: reqwest::Method, path: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
        let mut request = client().request(method, format!("{}{path}", self.base)).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let r = request.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value, String) {
        let r = self.post(path, body).await;
        let status = r.status().as_u16();
        let request_id = r.headers().get("x-request-id").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("non-JSON ({status}): {text}")), request_id)
    }

    pub async fn cost_rows(&self) -> Vec<(String, String, i32, i32, rust_decimal::Decimal, Option<String>)> {
        sqlx::query_as("SELECT request_id, status, input_tokens, output_tokens, cost, error_code FROM cost_records ORDER BY created_at")
            .fetch_all(&self.db)
            .await
            .unwrap()
    }
}

/// Configures `url` as the model's worker through the admin API (which probes at once) and waits until
/// the gateway routes to it.
pub async fn configure_worker(app: &TestApp, model: &str, url: &str) {
    let token = admin_token(&["ops"], None);
    let (status, body) =
        app.admin(reqwest::Method::PATCH, &format!("/admin/v1/models/{model}"), &token, Some(&json!({"workers": [url]}))).await;
    assert_eq!(status, 200, "{body}");
    wait_ready(app, model).await;
}

/// Waits until `/v1/models/{model}` says the model is ready (30 s at most).
pub async fn wait_ready(app: &TestApp, model: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m: Value =
            client().get(format!("{}/v1/models/{model}", app.base)).bearer_auth(&app.key).send().await.unwrap().json().await.unwrap();
        if m["is_ready"] == true {
            return;
        }
        assert!(Instant::now() < deadline, "{model} never became ready: {m}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Serves a stand-in worker for `model`: `/health` says it is ready, `/v1/chat/completions` is `chat`.
pub async fn stand_in_worker(model: &'static str, chat: axum::routing::MethodRouter) -> String {
    let health = json!({"status": "ok", "model": model, "slots": 4, "slots_busy": 0, "queue_depth": 0});
    let app = axum::Router::new()
        .route("/health", axum::routing::get(move || async move { axum::Json(health) }))
        .route("/v1/chat/completions", chat);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}
