//! One real stack for the whole test binary, all of it processes: a worker on the embedded model
//! (testkit), a fresh Postgres database migrated and seeded with the gateway's own subcommands, and
//! `runaii-gateway serve` on a free port. And [`runaii`], which runs the real `runaii` binary against it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use runaii_testkit::{WorkerProcess, MODEL, WORKER_SECRET};
use sqlx::PgPool;

const POSTGRES: &str = "postgres://postgres@127.0.0.1:5432";
const ADMIN_SECRET: &str = "cli-test-admin-secret-of-at-least-32-bytes";
const DB_PREFIX: &str = "runaii_cli_";
/// Databases a killed run left behind are dropped once they are this old (other checkouts may be running
/// these tests right now on the same server).
const STALE_DB: Duration = Duration::from_secs(3600);

pub struct Stack {
    pub base: String,
    pub key: String,
    pub admin_token: String,
    pub database_url: String,
    _worker: WorkerProcess,
    _gateway: std::process::Child,
}

/// The stack, started on first use.
pub fn stack() -> &'static Stack {
    // A stack that fails to start fails every test at once with its reason, rather than each test
    // starting another one.
    static STACK: OnceLock<Result<Stack, String>> = OnceLock::new();
    let started = STACK.get_or_init(|| {
        std::panic::catch_unwind(start).map_err(|e| e.downcast_ref::<String>().cloned().unwrap_or_else(|| format!("{e:?}")))
    });
    match started {
        Ok(stack) => stack,
        Err(why) => panic!("the test stack did not start: {why}"),
    }
}

/// The directory holding the workspace's binaries (`runaii-worker`, `runaii-gateway`) and examples.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_owned()
}

fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace (cargo test --workspace), or cargo build -p runaii-worker -p runaii-gateway",
        path.display()
    );
    path
}

/// The stdio MCP server of these tests (`cli/examples/mcp_fixture.rs`), which `cargo test` builds.
pub fn mcp_fixture() -> String {
    let path = bin_dir().join("examples").join("mcp_fixture");
    assert!(path.exists(), "{} is missing: cargo test -p runaii-cli builds it (a --test filter does not)", path.display());
    path.display().to_string()
}

pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap())
}

pub fn db() -> PgPool {
    runtime().block_on(PgPool::connect(&stack().database_url)).unwrap()
}

fn start() -> Stack {
    let worker = runaii_testkit::start_worker(&binary("runaii-worker"), &[]);
    let database_url = runtime().block_on(fresh_database());
    let gateway = binary("runaii-gateway");
    let admin = |args: &[&str]| -> String {
        let out = Command::new(&gateway).args(args).env("DATABASE_URL", &database_url).env("RUST_LOG", "error").output().unwrap();
        assert!(out.status.success(), "runaii-gateway {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().last().unwrap_or_default().to_owned()
    };
    admin(&["migrate"]);
    admin(&[
        "upsert-model",
        "--id",
        MODEL,
        "--context-length",
        "4096",
        "--input-price",
        "0.10",
        "--output-price",
        "0.30",
        "--supports-tools",
        "true",
        "--worker-url",
        &worker.url,
    ]);
    let key = admin(&["create-key", "--tenant", "cli-tests", "--name", "cli"]);
    admin(&["grant-credits", "--tenant", "cli-tests", "--amount", "100", "--note", "cli tests"]);
    let admin_token = admin(&["issue-admin-token", "--admin-jwt-secret", ADMIN_SECRET, "--ttl-hours", "2"]);

    let port = runaii_testkit::free_port();
    let log = std::fs::File::create(Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-tests-gateway.log")).unwrap();
    // `sh` holds the gateway and kills it when this process's end closes its stdin: the gateway has no
    // exit-on-EOF flag, and a static is never dropped.
    let child = Command::new("sh")
        .args(["-c", r#""$@" </dev/null & pid=$!; read -r _; kill "$pid"; wait "$pid""#, "sh"])
        .arg(&gateway)
        .arg("serve")
        .env("DATABASE_URL", &database_url)
        .env("RUNAII_GATEWAY_ADDR", format!("127.0.0.1:{port}"))
        .env("RUNAII_WORKER_SECRET", WORKER_SECRET)
        .env_remove("RUNAII_WORKER_SECRET_FILE")
        .env("RUNAII_ADMIN_JWT_SECRET", ADMIN_SECRET)
        .env("RUNAII_PROBE_MS", "300")
        .env("RUNAII_REGISTRY_REFRESH_MS", "200")
        .env("RUNAII_KEY_CACHE_MS", "300")
        .env("RUNAII_DEFAULT_RPM", "10000")
        .env("RUST_LOG", "warn")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .stdin(Stdio::piped())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    wait_until_ready(&base);
    Stack { base, key, admin_token, database_url, _worker: worker, _gateway: child }
}

async fn fresh_database() -> String {
    let admin = PgPool::connect(&format!("{POSTGRES}/postgres")).await.expect("Postgres on 127.0.0.1:5432 (user postgres)");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let old: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'runaii_cli_%'").fetch_all(&admin).await.unwrap();
    for name in old {
        let created = name.trim_start_matches(DB_PREFIX).split('_').next().and_then(|s| s.parse::<u64>().ok());
        if created.is_some_and(|c| now.saturating_sub(c) > STALE_DB.as_secs()) {
            // Names come from pg_database and match runaii_cli_<digits>_<digits>: safe to splice.
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await;
        }
    }
    let name = format!("{DB_PREFIX}{now}_{}", std::process::id());
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&admin).await.unwrap();
    format!("{POSTGRES}/{name}")
}

/// Until the gateway answers and reports the model ready (it probes the worker every 300 ms).
fn wait_until_ready(base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let home = scratch_dir("home");
    loop {
        // Not from this checkout: a quickstart's .data/demo-api-key up the tree would be sent (and refused).
        let out = Command::new(env!("CARGO_BIN_EXE_runaii"))
            .args(["models", "--output", "json", "--base-url", base])
            .current_dir(&home)
            .env("HOME", &home)
            .env_remove("RUNAII_API_KEY")
            .env_remove("RUNAII_CONFIG")
            .output()
            .unwrap();
        let ready = serde_json::from_slice::<serde_json::Value>(&out.stdout).is_ok_and(|v| v["data"][0]["is_ready"] == true);
        if ready {
            return;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-tests-gateway.log")).unwrap_or_default();
            panic!(
                "the gateway at {base} did not report {MODEL} ready; runaii said {}\ngateway log:\n{log}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A directory of its own under the target's tmp dir, empty.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What a run of `runaii` did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A `runaii` invocation: against the stack with its key unless told otherwise, in an empty directory
/// with an empty HOME, so no config file or quickstart key of this machine is found.
pub struct Runaii {
    command: Command,
    stdin: Option<String>,
}

pub fn runaii(args: &[&str]) -> Runaii {
    let stack = stack();
    let home = scratch_dir(&format!("home-{}", unique()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_runaii"));
    command
        .args(args)
        .current_dir(&home)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("RUNAII_CONFIG")
        .env_remove("RUNAII_ADMIN_TOKEN")
        .env("RUNAII_BASE_URL", &stack.base)
        .env("RUNAII_API_KEY", &stack.key);
    Runaii { command, stdin: None }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

impl Runaii {
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.command.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: &str) -> Self {
        self.command.env_remove(key);
        self
    }

    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.command.current_dir(dir);
        self
    }

    pub fn stdin(mut self, text: &str) -> Self {
        self.stdin = Some(text.to_owned());
        self
    }

    pub fn run(mut self) -> Run {
        self.command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = self.command.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        if let Some(text) = self.stdin.take() {
            stdin.write_all(text.as_bytes()).unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let run = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        let args: Vec<_> = self.command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        eprintln!("runaii {args:?} exited {} in {:?}\n--- stdout\n{}--- stderr\n{}", run.code, started.elapsed(), run.stdout, run.stderr);
        run
    }
}

/// A port nothing listens on: connections to it are refused.
pub fn closed_port_url() -> String {
    format!("http://127.0.0.1:{}", runaii_testkit::free_port())
}
