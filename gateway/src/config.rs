//! Gateway settings, from flags or `RUNAII_*` environment variables.

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand};
use runaii_wire::worker_auth::SecretText;

/// What `issue-admin-token` writes and the gateway requires of a staff token, unless configured otherwise.
pub const DEFAULT_ISSUER: &str = "runaii";
pub const DEFAULT_AUDIENCE: &str = "runaii-admin";

#[derive(Debug, Parser)]
#[command(name = "runaii-gateway", about = "Authenticated OpenAI-compatible gateway in front of runaii workers")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once at start: the size of the settings is irrelevant")]
pub enum Command {
    /// Serve the API.
    Serve(Settings),
    /// Apply the database migrations (run once per deploy, not by every replica).
    Migrate(DbArgs),
    /// Print the OpenAPI document (what `openapi/openapi.json` holds and `GET /openapi.json` serves).
    Openapi,
    /// Create a tenant (if missing) and a new API key for it; prints the key once.
    CreateKey {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Add or update a catalog model and the worker URL that serves it.
    UpsertModel {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        id: String,
        #[arg(long)]
        context_length: i32,
        /// USD per million input tokens, as a decimal.
        #[arg(long)]
        input_price: rust_decimal::Decimal,
        /// USD per million output tokens, as a decimal.
        #[arg(long)]
        output_price: rust_decimal::Decimal,
        /// USD per million input tokens read from a cache, as a decimal. A new model without it bills
        /// cached tokens at the input price; an existing one keeps its cached price.
        #[arg(long)]
        cached_input_price: Option<rust_decimal::Decimal>,
        #[arg(long)]
        worker_url: Option<String>,
        /// Whether the catalog advertises tool calling for this model (the worker's `/health` says
        /// `supports_tools` for templates that render tools; every templated model can use the generic format).
        #[arg(long)]
        supports_tools: Option<bool>,
    },
    /// Grant credit to a tenant (creating it if missing); the grant goes to the ledger and audit log.
    GrantCredits {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        tenant: String,
        /// USD, as a decimal; negative for an adjustment.
        #[arg(long, allow_hyphen_values = true)]
        amount: rust_decimal::Decimal,
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Set a tenant's caps (the tenant must exist); each given cap is a number, or `none` to remove it.
    /// Audited with actor `cli`.
    SetTenantCaps {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        tenant: String,
        /// Requests per minute across all the tenant's keys and replicas.
        #[arg(long)]
        rpm_limit: Option<Cap<i32>>,
        /// Tokens (prompt + output) per minute across all the tenant's keys and replicas.
        #[arg(long)]
        tpm_limit: Option<Cap<i32>>,
        /// USD the tenant's cost records may reach in a month (UTC), as a decimal.
        #[arg(long)]
        monthly_spend_cap: Option<Cap<rust_decimal::Decimal>>,
        /// Requests the tenant may have in flight at once, over every replica (1 to 100,000).
        #[arg(long)]
        max_concurrent_requests: Option<u32>,
    },
    /// Write a new worker secret to FILE unless one is there (docker compose runs this once).
    InitWorkerSecret {
        #[arg(long)]
        file: std::path::PathBuf,
        /// Hand the file to this uid (the user the gateway and worker images run as).
        #[arg(long)]
        owner_uid: Option<u32>,
    },
    /// Print the bearer token workers accept, derived from the worker secret: for an OpenAI-compatible
    /// engine configured as a worker (e.g. llama-server's `--api-key`).
    WorkerToken(WorkerArgs),
    /// Print an admin JWT signed with the HS256 secret (for local use and scripts), with `iat`, a fresh
    /// `jti`, and the issuer and audience the gateway requires.
    IssueAdminToken {
        #[arg(long, env = "RUNAII_ADMIN_JWT_SECRET", hide_env_values = true)]
        admin_jwt_secret: SecretText,
        #[arg(long, env = "RUNAII_ADMIN_JWT_ISSUER", default_value = DEFAULT_ISSUER)]
        issuer: String,
        #[arg(long, env = "RUNAII_ADMIN_JWT_AUDIENCE", default_value = DEFAULT_AUDIENCE)]
        audience: String,
        /// Who the token speaks for; written to the audit log.
        #[arg(long, default_value = "local-admin")]
        subject: String,
        /// Comma-separated roles: ops, finance, admin.
        #[arg(long, value_delimiter = ',', default_value = "ops,finance,admin")]
        roles: Vec<String>,
        /// Confine the token to one tenant's data.
        #[arg(long)]
        tenant_id: Option<uuid::Uuid>,
        #[arg(long, default_value_t = 24)]
        ttl_hours: u64,
    },
    /// Revoke a staff token by its `jti` (audited, actor `cli`); every replica refuses it within seconds.
    RevokeAdminToken {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        jti: String,
        /// How long the revocation is kept: the longest a token may live.
        #[arg(long, env = "RUNAII_ADMIN_JWT_MAX_LIFETIME_HOURS", default_value_t = 720)]
        max_lifetime_hours: u32,
    },
}

/// A cap given on the command line: a value, or `none` to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap<T>(pub Option<T>);

impl<T: std::str::FromStr> std::str::FromStr for Cap<T>
where
    T::Err: std::fmt::Display,
{
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("none") {
            return Ok(Self(None));
        }
        s.parse().map(|v| Self(Some(v))).map_err(|e| format!("{e} (or `none` to remove the cap)"))
    }
}

#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// May hold a password: never printed (`Debug` redacts it).
    #[arg(long, env = "DATABASE_URL", default_value = "postgres://postgres@127.0.0.1:5432/runaii", hide_env_values = true)]
    pub database_url: SecretText,
    /// Connections this process may hold; replicas × this must stay under Postgres' max_connections.
    #[arg(long, env = "RUNAII_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,
}

#[derive(Debug, Clone, Args)]
pub struct Settings {
    #[command(flatten)]
    pub db: DbArgs,
    /// May hold a password: never printed (`Debug` redacts it). Several comma-separated node URLs mean a
    /// Redis Cluster (rate limits, the worker registry and console sessions all work on one).
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379", hide_env_values = true)]
    pub redis_url: SecretText,
    #[arg(long, env = "RUNAII_GATEWAY_ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// A second, private listener serving `/metrics` without a token (and `/health`), for Prometheus on
    /// the cluster network. Unset: none; the public `/metrics` then needs an ops or finance admin JWT.
    #[arg(long, env = "RUNAII_METRICS_ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "RUNAII_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// How long a client may take to send its request body, in milliseconds: a body that trickles in
    /// slower than this is cut off with 408 instead of holding a connection and its memory open.
    #[arg(long, env = "RUNAII_BODY_READ_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_read_timeout_ms: u64,
    /// How long a client may take to send a request's head (request line and headers), in milliseconds,
    /// on both listeners; a connection that misses it is closed. It also closes a keep-alive connection
    /// idle this long, so a proxy in front should drop its idle upstream connections sooner.
    #[arg(long, env = "RUNAII_HEADER_READ_TIMEOUT_MS", default_value_t = 30_000)]
    pub header_read_timeout_ms: u64,
    /// How long a streaming client may leave the next chunk untaken, in milliseconds: a client that stops
    /// reading is cut after this, billed for what was delivered, and the worker's slot is freed.
    #[arg(long, env = "RUNAII_CLIENT_WRITE_TIMEOUT_MS", default_value_t = 30_000)]
    pub client_write_timeout_ms: u64,
    /// How long a key lookup is trusted before the database is asked again: a revoked key stops working
    /// within this many milliseconds on every replica.
    #[arg(long, env = "RUNAII_KEY_CACHE_MS", default_value_t = 2000)]
    pub key_cache_ms: u64,
    /// Keys kept in each replica's key cache, and as many unknown public ids in its negative cache; each
    /// evicts its least recently used entry when full.
    #[arg(long, env = "RUNAII_KEY_CACHE_ENTRIES", default_value = "100000")]
    pub key_cache_entries: std::num::NonZeroUsize,
    /// Failed authentications (wrong, unknown, revoked or expired API keys) allowed per source address and
    /// minute on each replica. Past it the address gets 429 `too_many_failed_authentications`, and keys
    /// this replica has not already found are not looked up for it.
    #[arg(long, env = "RUNAII_AUTH_FAILURES_PER_MINUTE", default_value = "60")]
    pub auth_failures_per_minute: std::num::NonZeroU32,
    /// How long the ledger writer may wait, in microseconds, for the records of non-streamed requests
    /// whose workers are answering, so that they share one commit (0: never wait). It commits as soon as
    /// all have arrived; a lone request never waits.
    #[arg(long, env = "RUNAII_LEDGER_LINGER_US", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub ledger_linger_us: u64,
    /// How often statically configured workers are probed for health, in milliseconds.
    #[arg(long, env = "RUNAII_PROBE_MS", default_value_t = 1000)]
    pub probe_ms: u64,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub admin: AdminArgs,
    #[command(flatten)]
    pub workers: WorkerArgs,
    #[command(flatten)]
    pub responses: ResponseStoreArgs,
    #[command(flatten)]
    pub files: FileArgs,
    #[command(flatten)]
    pub batches: BatchArgs,
}

/// The Batch API's runner on this replica.
#[derive(Debug, Clone, Args)]
pub struct BatchArgs {
    /// Batch lines this replica runs at once (across all batches). They wait at the worker behind every
    /// online request, so more only helps while the workers have idle slots.
    #[arg(long = "batch-concurrency", env = "RUNAII_BATCH_CONCURRENCY", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub concurrency: u32,
    /// How often the runner looks for work, in milliseconds, besides being woken when a batch is created
    /// or cancelled and when a line finishes.
    #[arg(long = "batch-poll-ms", env = "RUNAII_BATCH_POLL_MS", default_value_t = 1000)]
    pub poll_ms: u64,
    /// Tokens a tenant's unfinished batches may hold (each line counted at its prompt's bound plus its
    /// `max_tokens`, the context length when it sets none); a batch that would pass it fails
    /// `token_limit_exceeded`. The batches' own pool: online rate limits are not touched.
    #[arg(long = "batch-max-enqueued-tokens", env = "RUNAII_BATCH_MAX_ENQUEUED_TOKENS", default_value_t = 100_000_000, value_parser = clap::value_parser!(i64).range(1..))]
    pub max_enqueued_tokens: i64,
}

impl Default for BatchArgs {
    fn default() -> Self {
        Self { concurrency: 8, poll_ms: 1000, max_enqueued_tokens: 100_000_000 }
    }
}

/// Files (`/v1/files`): how large one may be, how long its upload may take, and how many bytes a
/// tenant's files may take unless it has terms of its own (table `file_storage_terms`).
#[derive(Debug, Clone, Args)]
pub struct FileArgs {
    /// The largest file accepted, in bytes (OpenAI's limit for a Batch API input: 200 MB).
    #[arg(long = "files-max-bytes", env = "RUNAII_FILES_MAX_BYTES", default_value_t = 200 * 1000 * 1000, value_parser = clap::value_parser!(u64).range(1..=1 << 40))]
    pub max_bytes: u64,
    /// How long a client may take to send one upload, in milliseconds (it replaces
    /// `--body-read-timeout-ms` on `POST /v1/files`).
    #[arg(long = "files-upload-timeout-ms", env = "RUNAII_FILES_UPLOAD_TIMEOUT_MS", default_value_t = 600_000)]
    pub upload_timeout_ms: u64,
    /// Bytes a tenant's files may take; past it, uploads are refused.
    #[arg(id = "files_max_stored_bytes", long = "files-max-stored-bytes", env = "RUNAII_FILES_MAX_STORED_BYTES", default_value_t = 10 * 1000 * 1000 * 1000, value_parser = clap::value_parser!(i64).range(0..))]
    pub max_stored_bytes: i64,
    /// Where files' bytes are kept: `postgres` (the gateway's database, nothing more to run) or
    /// `s3://BUCKET[/PREFIX]` (an S3-compatible object store, for a fleet; see the `--files-s3-*` options).
    #[arg(long = "files-store", env = "RUNAII_FILES_STORE", default_value = "postgres")]
    pub store: FileStore,
    #[command(flatten)]
    pub s3: S3Args,
}

impl Default for FileArgs {
    fn default() -> Self {
        Self {
            max_bytes: 200 * 1000 * 1000,
            upload_timeout_ms: 600_000,
            max_stored_bytes: 10 * 1000 * 1000 * 1000,
            store: FileStore::Postgres,
            s3: S3Args::default(),
        }
    }
}

/// Where files' bytes are kept (`--files-store`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileStore {
    Postgres,
    /// Objects `PREFIX/files/<file id>/<part>` in `bucket`.
    S3 {
        bucket: String,
        prefix: String,
    },
}

impl std::str::FromStr for FileStore {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "postgres" {
            return Ok(Self::Postgres);
        }
        let Some(rest) = s.strip_prefix("s3://") else {
            return Err(format!("'{s}' is neither 'postgres' nor 's3://BUCKET[/PREFIX]'"));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(format!("'{s}' names no bucket"));
        }
        Ok(Self::S3 { bucket: bucket.to_owned(), prefix: prefix.trim_matches('/').to_owned() })
    }
}

/// The S3-compatible store of `--files-store s3://…`. What is not given here comes from the standard
/// AWS variables (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, web
/// identity, the instance's metadata service), as AWS's own tools find it.
#[derive(Debug, Clone, Default, Args)]
pub struct S3Args {
    /// The store's URL, for a store other than AWS (Ceph's radosgw, say): buckets are addressed by path,
    /// and an `http://` endpoint is allowed.
    #[arg(long = "files-s3-endpoint", env = "RUNAII_S3_ENDPOINT")]
    pub endpoint: Option<String>,
    /// The bucket's region (`us-east-1` where neither this nor `AWS_REGION` says).
    #[arg(long = "files-s3-region", env = "RUNAII_S3_REGION")]
    pub region: Option<String>,
    /// An access key id.
    #[arg(long = "files-s3-access-key-id", env = "RUNAII_S3_ACCESS_KEY_ID")]
    pub access_key_id: Option<String>,
    /// Its secret: never printed (best given in the environment).
    #[arg(long = "files-s3-secret-access-key", env = "RUNAII_S3_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub secret_access_key: Option<SecretText>,
}

/// The Responses store (`inference::responses::store`): how long a tenant's stored responses are kept
/// and how many bytes they may take, unless the tenant has terms of its own.
#[derive(Debug, Clone, Args)]
pub struct ResponseStoreArgs {
    /// Hours a stored response is kept (30 days, as OpenAI keeps them).
    #[arg(long = "responses-retention-hours", env = "RUNAII_RESPONSES_RETENTION_HOURS", default_value_t = 720, value_parser = clap::value_parser!(i32).range(1..))]
    pub retention_hours: i32,
    /// Bytes a tenant's stored responses may take; past it, requests asking to store are refused.
    #[arg(long = "responses-max-stored-bytes", env = "RUNAII_RESPONSES_MAX_STORED_BYTES", default_value_t = 256 * 1024 * 1024, value_parser = clap::value_parser!(i64).range(0..))]
    pub max_stored_bytes: i64,
}

impl Default for ResponseStoreArgs {
    fn default() -> Self {
        Self { retention_hours: 720, max_stored_bytes: 256 * 1024 * 1024 }
    }
}

/// Reaching workers: the credential they and the gateways share, and how long they may take.
#[derive(Debug, Clone, Args)]
pub struct WorkerArgs {
    /// The fleet's shared worker secret, one per line (the first is sent; every line is accepted, for
    /// rotation). Every request to a worker is signed with it, and only announcements signed with it are
    /// routed to. Re-read while running. `scripts/run.sh` writes `.data/worker-secret`.
    #[arg(long, env = "RUNAII_WORKER_SECRET_FILE")]
    pub worker_secret_file: Option<std::path::PathBuf>,
    /// The secret itself, for development and tests; the file is preferred (it can be rotated).
    #[arg(long, env = "RUNAII_WORKER_SECRET", hide_env_values = true)]
    pub worker_secret: Option<SecretText>,
    /// How often the registry of announced workers is read from Redis, in milliseconds.
    #[arg(long, env = "RUNAII_REGISTRY_REFRESH_MS", default_value_t = 1000)]
    pub registry_refresh_ms: u64,
    /// How long a worker may take to answer a request's headers, in milliseconds, besides generating: a
    /// streamed answer's headers come before its first token, so this is its whole wait; a whole answer's
    /// come with its end, so its wait is this plus its `max_tokens` at the model's speed (see
    /// `worker_min_tokens_per_second`).
    #[arg(long, env = "RUNAII_WORKER_HEADERS_TIMEOUT_MS", default_value_t = 300_000)]
    pub worker_headers_timeout_ms: u64,
    /// The slowest generation, in tokens per second of one answer, that a whole answer's deadline allows
    /// for; a model measured slower than twice this gets twice its measured time instead.
    #[arg(long, env = "RUNAII_WORKER_MIN_TOKENS_PER_SECOND", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub worker_min_tokens_per_second: u32,
    /// How long a worker may go silent once its answer has begun, in milliseconds: a stream with no
    /// event (a whole answer with no bytes) for this long is cut and recorded `failed`.
    #[arg(long, env = "RUNAII_WORKER_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    pub worker_idle_timeout_ms: u64,
}

impl WorkerArgs {
    /// # Errors
    /// No secret configured, or an unusable one: the gateway never talks to workers without one.
    pub fn secrets(&self) -> Result<runaii_wire::worker_auth::WorkerSecrets, runaii_wire::worker_auth::SecretError> {
        runaii_wire::worker_auth::WorkerSecrets::load(self.worker_secret_file.as_ref(), self.worker_secret.as_ref())
    }
}

#[derive(Debug, Clone, Args)]
pub struct LimitArgs {
    /// Requests per minute for keys without their own limit.
    #[arg(long, env = "RUNAII_DEFAULT_RPM", default_value_t = 600)]
    pub default_rpm: u32,
    /// Tokens (prompt + output) per minute for keys without their own limit.
    #[arg(long, env = "RUNAII_DEFAULT_TPM", default_value_t = 1_000_000)]
    pub default_tpm: u32,
    /// While Redis is unreachable: `local` enforces this replica's share of every limit (the limit divided
    /// by the live replicas) from memory, `closed` answers 503 `rate_limiter_unavailable`, `open` serves
    /// without rate limits (credits still bound spending).
    #[arg(long, env = "RUNAII_RATE_LIMIT_ON_REDIS_FAILURE", value_enum, default_value_t = RedisFailure::Local)]
    pub on_redis_failure: RedisFailure,
    /// How long an `Idempotency-Key` and its answer are kept, in hours (at least 24).
    #[arg(long, env = "RUNAII_IDEMPOTENCY_TTL_HOURS", default_value_t = 24, value_parser = clap::value_parser!(u32).range(24..))]
    pub idempotency_ttl_hours: u32,
    /// The largest answer kept for an `Idempotency-Key`, in bytes. A larger one is delivered once and its
    /// key then answers 422 `idempotent_answer_not_stored`: never run twice, never held in memory unbounded.
    #[arg(long, env = "RUNAII_IDEMPOTENCY_MAX_STORED_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub idempotency_max_stored_bytes: usize,
    /// `Idempotency-Key`s a tenant may hold at once (each kept `--idempotency-ttl-hours`). Past it a request
    /// with a new key is refused with 429 `idempotency_quota_exceeded`; retries of kept keys still replay.
    #[arg(long, env = "RUNAII_IDEMPOTENCY_MAX_KEYS_PER_TENANT", default_value_t = 100_000)]
    pub idempotency_max_keys_per_tenant: i64,
    /// Bytes of stored idempotent answers a tenant may hold at once; past it, as for the number of keys.
    #[arg(long, env = "RUNAII_IDEMPOTENCY_MAX_BYTES_PER_TENANT", default_value_t = 256 * 1024 * 1024)]
    pub idempotency_max_bytes_per_tenant: i64,
    /// A credit hold older than this many seconds belongs to a request whose gateway died; it is released.
    /// Must be longer than `--max-request-s`, so no running request loses its hold.
    #[arg(long, env = "RUNAII_HOLD_EXPIRY_S", default_value_t = 7200)]
    pub hold_expiry_s: u32,
    /// The longest a request may run, in seconds, streamed or not: past it the answer is ended (a
    /// stream's last event is an error) and billed for the work done. Shorter than `--hold-expiry-s`, so
    /// a request never outlives the credit it holds.
    #[arg(long, env = "RUNAII_MAX_REQUEST_S", default_value_t = 3600, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_request_s: u32,
    /// How often this replica tells the others it is alive (and releases the holds of dead ones), in
    /// milliseconds.
    #[arg(long, env = "RUNAII_REPLICA_HEARTBEAT_MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..))]
    pub replica_heartbeat_ms: u64,
    /// A replica not heard from for this many milliseconds is dead: its credit holds are released. Keep it
    /// several heartbeats long, so that a slow database does not make a live replica look dead.
    #[arg(long, env = "RUNAII_REPLICA_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1000..))]
    pub replica_timeout_ms: u64,
}

/// How admin JWTs are verified: HS256 secrets or RS256 public keys (PEM), several at once for rotation,
/// and what every token must say. Without a key the admin API answers 503.
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Never printed (`Debug` redacts it).
    #[arg(long, env = "RUNAII_ADMIN_JWT_SECRET", hide_env_values = true)]
    pub admin_jwt_secret: Option<SecretText>,
    /// A file of HS256 secrets, one per line, each accepted (with the one above, if set): for rotation
    /// with overlap. `issue-admin-token` signs with the first line.
    #[arg(long, env = "RUNAII_ADMIN_JWT_SECRET_FILE")]
    pub admin_jwt_secret_file: Option<std::path::PathBuf>,
    /// PEM files of RS256 public keys, comma-separated, each accepted; a key's `kid` is its file name
    /// without the extension.
    #[arg(long, env = "RUNAII_ADMIN_JWT_PUBLIC_KEY", value_delimiter = ',')]
    pub admin_jwt_public_key: Vec<std::path::PathBuf>,
    /// The `iss` every token must carry.
    #[arg(long, env = "RUNAII_ADMIN_JWT_ISSUER", default_value = DEFAULT_ISSUER)]
    pub admin_jwt_issuer: String,
    /// The `aud` every token must carry.
    #[arg(long, env = "RUNAII_ADMIN_JWT_AUDIENCE", default_value = DEFAULT_AUDIENCE)]
    pub admin_jwt_audience: String,
    /// The longest a token may live (`exp - iat`), in hours; a longer-lived token is refused.
    #[arg(long, env = "RUNAII_ADMIN_JWT_MAX_LIFETIME_HOURS", default_value_t = 720)]
    pub admin_jwt_max_lifetime_hours: u32,
}

impl Default for AdminArgs {
    fn default() -> Self {
        Self {
            admin_jwt_secret: None,
            admin_jwt_secret_file: None,
            admin_jwt_public_key: Vec::new(),
            admin_jwt_issuer: DEFAULT_ISSUER.to_owned(),
            admin_jwt_audience: DEFAULT_AUDIENCE.to_owned(),
            admin_jwt_max_lifetime_hours: 720,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clap's own checks of the command line (names unique across flattened groups, among others), which
    /// otherwise run only when a binary starts.
    #[test]
    fn the_command_line_is_well_formed() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }

    /// Settings are logged at start: no credential in them may reach the log.
    #[test]
    fn debug_never_prints_credentials() {
        let cli = Cli::try_parse_from([
            "runaii-gateway",
            "serve",
            "--database-url",
            "postgres://runaii:db-password-1@db:5432/runaii",
            "--redis-url",
            "redis://:redis-password-2@redis:6379",
            "--worker-secret",
            "worker-secret-3-of-at-least-32-bytes!!",
            "--admin-jwt-secret",
            "jwt-secret-4",
            "--files-s3-secret-access-key",
            "s3-secret-5",
        ])
        .unwrap();
        let printed = format!("{cli:?}");
        for secret in ["db-password-1", "redis-password-2", "worker-secret-3", "jwt-secret-4", "s3-secret-5"] {
            assert!(!printed.contains(secret), "{secret} printed: {printed}");
        }
        let Command::Serve(settings) = cli.command else { panic!("serve") };
        assert_eq!(settings.db.database_url.expose(), "postgres://runaii:db-password-1@db:5432/runaii");
    }

    #[test]
    fn a_file_store_is_postgres_or_an_s3_bucket() {
        assert_eq!("postgres".parse::<FileStore>(), Ok(FileStore::Postgres));
        assert_eq!("s3://b".parse::<FileStore>(), Ok(FileStore::S3 { bucket: "b".into(), prefix: String::new() }));
        assert_eq!("s3://b/a/c/".parse::<FileStore>(), Ok(FileStore::S3 { bucket: "b".into(), prefix: "a/c".into() }));
        assert!("s3://".parse::<FileStore>().is_err());
        assert!("s3:///p".parse::<FileStore>().is_err());
        assert!("gs://b".parse::<FileStore>().is_err());
        assert!("database".parse::<FileStore>().is_err());
    }
}

/// What the gateway does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RedisFailure {
    /// Enforce this replica's share of every limit (the limit divided by the live replicas) from memory.
    Local,
    /// Refuse with 503 `rate_limiter_unavailable`.
    Closed,
    /// Serve without rate limits (an explicit choice; credits still bound what a tenant spends).
    Open,
}
