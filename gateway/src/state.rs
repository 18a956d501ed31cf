//! Shared state: connections and caches. Nothing here is needed by another replica.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use axum::extract::FromRef;

use crate::auth::staff::{RevokedTokens, StaffTokens, Verifier};
use crate::auth::{FailedAuth, KeyCache, KeyCheck};
use crate::config::Settings;
use crate::ratelimit::Limiter;
use crate::ratelimit::Limits;
use crate::redis_link::RedisLink;
use crate::upstream::Registry;

/// What every handler and task shares: one `Arc`, so a request's clone of the state is one counter
/// increment, not one per connection and cache (cloning and dropping the fields one by one was 2% of the
/// gateway's CPU under load).
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

#[derive(Debug)]
pub struct Shared {
    pub db: PgPool,
    pub keys: Arc<KeyCache>,
    /// Failed authentications per source address (`auth::attempts`).
    pub auth_failures: Arc<FailedAuth>,
    /// This replica's leases of tenants' credit (`billing::leases`).
    pub leases: Arc<crate::billing::leases::Leases>,
    /// Writes cost records in groups, one transaction per group (`billing::writer`).
    pub ledger: crate::billing::writer::LedgerWriter,
    /// The catalog every request reads, kept fresh by `changes.rs`.
    pub catalog: Arc<crate::catalog::Catalog>,
    pub registry: Arc<Registry>,
    pub limiter: Arc<Limiter>,
    /// Tenants' month spend, read for their monthly caps.
    pub spend_caps: crate::ratelimit::spend_cap::SpendCaps,
    /// Background responses' events, for every replica to stream (`inference::responses::replay`).
    pub response_events: crate::response_events::EventLog,
    /// Each tenant's requests in flight, against its cap (`concurrency`).
    pub concurrency: Arc<crate::concurrency::Concurrency>,
    /// `None` when no admin JWT key is configured: the admin API then answers 503.
    pub admin: Option<Arc<Verifier>>,
    /// Staff tokens revoked before they expire, kept fresh by `changes.rs`.
    pub revoked_tokens: Arc<RevokedTokens>,
    pub http: reqwest::Client,
    /// The credential shared with workers (re-read from its file while running).
    pub secrets: runaii_wire::worker_auth::WorkerSecrets,
    pub settings: Arc<Settings>,
    /// Wakes this replica's batch runner: a batch was created or cancelled, or a line finished.
    pub batches_wake: Arc<tokio::sync::Notify>,
    /// Where files' bytes are kept (`file_store`).
    pub files: crate::file_store::Storage,
    /// This process's id among the gateway replicas: credit holds name it, so that if the process dies the
    /// other replicas release them (see `db::replicas`).
    pub replica_id: uuid::Uuid,
    /// Work that outlives its HTTP exchange (a stream's relay, a request whose client left, an idempotent
    /// answer being stored): graceful shutdown waits for it, so no answer goes unrecorded.
    pub tasks: tokio_util::task::TaskTracker,
}

impl AppState {
    /// What sending a request to a worker takes of this state.
    #[must_use]
    pub fn fleet(&self) -> crate::upstream::Fleet<'_> {
        crate::upstream::Fleet { registry: &self.registry, http: &self.http, secrets: &self.secrets, settings: &self.settings }
    }

    /// # Errors
    /// When Postgres cannot be reached at start, or the admin key is misconfigured. Redis may be down.
    pub async fn new(settings: Settings) -> anyhow::Result<Self> {
        let revoked_tokens = Arc::new(RevokedTokens::default());
        let admin = Verifier::from_args(&settings.admin, Arc::clone(&revoked_tokens))?.map(Arc::new);
        let db = crate::db::connect(&settings.db).await?;
        // A worker's answer is the answer: a redirect is not followed. Followed, a worker (or whatever holds
        // its address) could send a customer's prompt, or the gateway's probes, to any host the gateway can
        // reach.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .pool_idle_timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        // One link per use of Redis: a failure the registry meets never switches the limiter or the
        // concurrency caps off.
        let registry_redis = Arc::new(RedisLink::new(settings.redis_url.expose()).await?);
        let limiter_redis = RedisLink::new(settings.redis_url.expose()).await?;
        let concurrency_redis = Arc::new(RedisLink::new(settings.redis_url.expose()).await?);
        let events_redis = RedisLink::new(settings.redis_url.expose()).await?;
        let secrets = settings.workers.secrets()?;
        let replica_id = uuid::Uuid::now_v7();
        let tasks = tokio_util::task::TaskTracker::new();
        let files = crate::file_store::Storage::open(&settings.files.store, &settings.files.s3, &db).await?;
        Ok(Self(Arc::new(Shared {
            keys: Arc::new(KeyCache::new(Duration::from_millis(settings.key_cache_ms), settings.key_cache_entries)),
            auth_failures: Arc::new(FailedAuth::new(settings.auth_failures_per_minute)),
            catalog: Arc::default(),
            ledger: crate::billing::writer::LedgerWriter::start(db.clone(), Duration::from_micros(settings.ledger_linger_us)),
            leases: Arc::new(crate::billing::leases::Leases::new(db.clone(), replica_id)),
            registry: Arc::new(Registry::new(registry_redis, db.clone(), http.clone(), secrets.clone())),
            concurrency: crate::concurrency::Concurrency::new(concurrency_redis, tasks.clone()),
            response_events: crate::response_events::EventLog::new(events_redis),
            limiter: Arc::new(Limiter::new(limiter_redis, settings.limits.on_redis_failure)),
            spend_caps: crate::ratelimit::spend_cap::SpendCaps::new(db.clone()),
            admin,
            revoked_tokens,
            secrets,
            db,
            http,
            files,
            batches_wake: Arc::default(),
            settings: Arc::new(settings),
            replica_id,
            tasks,
        })))
    }
}

impl FromRef<AppState> for KeyCheck {
    fn from_ref(state: &AppState) -> Self {
        let limits = &state.settings.limits;
        Self {
            cache: Arc::clone(&state.keys),
            failures: Arc::clone(&state.auth_failures),
            db: state.db.clone(),
            defaults: Limits { requests_per_minute: limits.default_rpm, tokens_per_minute: limits.default_tpm },
        }
    }
}

impl FromRef<AppState> for StaffTokens {
    fn from_ref(state: &AppState) -> Self {
        Self(state.admin.clone())
    }
}
