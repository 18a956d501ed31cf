//! Which workers are ready, as an in-memory view every request reads without a round trip. Two sources
//! keep it fresh in the background:
//!
//! - workers that announce themselves in Redis: one field each in one hash (`runaii_wire::announcement`),
//!   read with one `HGETALL` per refresh, so the cost is O(workers) whatever else the database holds.
//!   Only announcements signed with the fleet's worker secret count; anything else (a key written by
//!   whoever can reach Redis) is ignored and counted;
//! - workers configured in the database (`model_workers`, written by ops), probed on `/health`.
//!
//! Each status is adjusted by what this replica knows better (`load.rs`): its own requests in flight
//! there, and those that ended since the status was taken.
//!
//! A worker that fails at the transport level (refused connection, a reset, a malformed answer) is set
//! aside for a few seconds. Answers about a request (4xx, a failed validation) and a request that outlived
//! its deadline never take a worker out of rotation: a worker that hangs is found by its probes and its
//! announcements instead. Nothing here is state another replica needs.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use runaii_wire::announcement::{self, Opened, Rejected, REGISTRY_KEY};
use runaii_wire::worker_auth::WorkerSecrets;
use sqlx::PgPool;

use super::load::{InFlight, LocalLoad, Mark};

pub use runaii_wire::announcement::WorkerStatus;

use crate::redis_link::RedisLink;

/// How long a worker that failed at the transport level is left out of routing (unless a probe finds
/// it healthy sooner).
const SET_ASIDE_FOR: Duration = Duration::from_secs(5);

/// Deletes a dead worker's field only if it still holds the value that was read: a worker that
/// re-announced meanwhile keeps its fresh announcement.
const DELETE_IF_UNCHANGED: &str =
    r"if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end return 0";

#[derive(Debug, Default)]
struct View {
    announced: Vec<Opened>,
    /// Probed statuses, each with this replica's count of finished requests when the probe was sent.
    probed: Vec<(WorkerStatus, Mark)>,
}

pub struct Registry {
    redis: Arc<RedisLink>,
    db: PgPool,
    http: reqwest::Client,
    secrets: WorkerSecrets,
    view: RwLock<View>,
    /// This replica's own requests, by worker.
    load: LocalLoad,
    set_aside: Mutex<HashMap<String, Instant>>,
    /// How fast each model's answers come, for the deadline of a whole answer.
    pace: super::pace::Pace,
    /// Fields already warned about, so a bad entry is logged once, not at every refresh.
    warned: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

/// The largest `/health` answer read from a configured worker.
const HEALTH_MAX_BYTES: usize = 64 * 1024;

impl Registry {
    #[must_use]
    pub fn new(redis: Arc<RedisLink>, db: PgPool, http: reqwest::Client, secrets: WorkerSecrets) -> Self {
        Self {
            redis,
            db,
            http,
            secrets,
            view: RwLock::default(),
            load: LocalLoad::default(),
            set_aside: Mutex::default(),
            pace: super::pace::Pace::default(),
            warned: Mutex::default(),
        }
    }

    /// Ready workers of one model, least loaded first. Reads memory only.
    pub async fn ready(&self, model: &str) -> Vec<WorkerStatus> {
        let mut workers: Vec<WorkerStatus> = self.all_ready().await.into_iter().filter(|w| w.model == model).collect();
        workers.sort_by(|a, b| a.load().total_cmp(&b.load()));
        workers
    }

    /// Every ready worker of every model: announced ones, then probed ones not also announced.
    pub async fn all_ready(&self) -> Vec<WorkerStatus> {
        let now = announcement::now_ms();
        let set_aside = self.currently_set_aside();
        let view = self.view.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        // An announcement's time is the worker's, not a point in this replica's count: no mark.
        let mut workers: Vec<(WorkerStatus, Option<Mark>)> =
            view.announced.iter().filter(|a| a.expires_at_ms > now).map(|a| (a.status.clone(), None)).collect();
        for (status, mark) in &view.probed {
            if !workers.iter().any(|(w, _)| w.url == status.url && w.model == status.model) {
                workers.push((status.clone(), Some(*mark)));
            }
        }
        drop(view);
        workers.retain(|(w, _)| !set_aside.contains(&w.url));
        workers
            .into_iter()
            .map(|(mut status, mark)| {
                self.load.adjust(&mut status, mark);
                status
            })
            .collect()
    }

    /// The models' measured speeds.
    #[must_use]
    pub fn pace(&self) -> &super::pace::Pace {
        &self.pace
    }

    /// Counts a request to `url` in that worker's load until the guard drops.
    #[must_use]
    pub fn start_request(&self, url: &str) -> InFlight {
        self.load.start(url)
    }

    /// Models with at least one ready worker.
    pub async fn ready_models(&self) -> HashSet<String> {
        self.all_ready().await.into_iter().map(|w| w.model).collect()
    }

    fn currently_set_aside(&self) -> HashSet<String> {
        let mut set_aside = self.set_aside.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        set_aside.retain(|_, at| at.elapsed() < SET_ASIDE_FOR);
        set_aside.keys().cloned().collect()
    }

    /// Leaves a worker out of routing for a few seconds: it failed at the transport level (refused, reset,
    /// an answer that is not HTTP). Not for answers about a request, nor for a request past its deadline.
    pub fn set_aside(&self, url: &str) {
        self.set_aside.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(url.to_owned(), Instant::now());
    }

    /// Reads the announcements once: verified ones replace the view's; rejected ones are counted, and
    /// dead workers' fields are deleted. While Redis is unavailable the view keeps what it had, each
    /// entry until its own signed expiry.
    pub async fn refresh(&self) {
        let Some(fields) = self
            .redis
            .run(|mut redis| async move { redis::cmd("HGETALL").arg(REGISTRY_KEY).query_async::<Vec<(String, String)>>(&mut redis).await })
            .await
        else {
            return;
        };
        let now = announcement::now_ms();
        let metrics = crate::metrics::global();
        let mut announced = Vec::with_capacity(fields.len());
        let mut dead = Vec::new();
        for (field, value) in fields {
            match announcement::open(&self.secrets, &field, &value, now) {
                Ok(opened) => announced.push(opened),
                Err(rejected) => {
                    metrics.announcements_rejected.add(&[rejected.reason()], 1);
                    if rejected == Rejected::Expired {
                        dead.push((field, value));
                    } else {
                        self.warn_once(&field, rejected);
                    }
                }
            }
        }
        self.view.write().unwrap_or_else(std::sync::PoisonError::into_inner).announced = announced;
        for (field, value) in dead {
            let _ = self
                .redis
                .run(|mut redis| async move {
                    redis::Script::new(DELETE_IF_UNCHANGED).key(REGISTRY_KEY).arg(field).arg(value).invoke_async::<i64>(&mut redis).await
                })
                .await;
        }
    }

    fn warn_once(&self, field: &str, rejected: Rejected) {
        let mut warned = self.warned.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if warned.len() < 10_000 && warned.insert(format!("{}:{field}", rejected.reason())) {
            // The field names a URL of someone's choosing: logged for ops, never routed to.
            tracing::warn!(field = %field.replace('\n', " "), reason = %rejected, "worker announcement ignored");
        }
    }

    pub async fn refresh_forever(&self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            self.refresh().await;
        }
    }

    /// Probes every configured worker once. Run on an interval by [`Registry::probe_forever`].
    pub async fn probe(&self) {
        let configured = match crate::db::models::configured_workers(&self.db).await {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read configured workers");
                return;
            }
        };
        let mut fresh = Vec::with_capacity(configured.len());
        for (model, url) in configured {
            let mark = self.load.mark(&url);
            if let Some(status) = self.probe_one(&model, &url).await {
                // Healthy again: back into routing before its set-aside ends.
                self.set_aside.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&url);
                fresh.push((status, mark));
            }
        }
        self.view.write().unwrap_or_else(std::sync::PoisonError::into_inner).probed = fresh;
    }

    async fn probe_one(&self, model: &str, url: &str) -> Option<WorkerStatus> {
        let response = self
            .http
            .get(format!("{url}/health"))
            .header(reqwest::header::AUTHORIZATION, self.secrets.bearer_header())
            .timeout(Duration::from_secs(1))
            .send()
            .await
            .ok()?;
        if !response.status().is_success() {
            return None;
        }
        // A health answer is a few hundred bytes; a worker that sends more is not healthy.
        let health = super::body::read_whole(response, HEALTH_MAX_BYTES, Duration::from_secs(1)).await.ok()?;
        let health: serde_json::Value = serde_json::from_slice(&health).ok()?;
        if health["model"] != model {
            tracing::warn!(%url, %model, served = %health["model"], "configured worker serves another model");
            return None;
        }
        let n = |k: &str| health[k].as_u64().unwrap_or(0);
        Some(WorkerStatus {
            url: url.to_owned(),
            model: model.to_owned(),
            slots: n("slots"),
            slots_busy: n("slots_busy"),
            queue_depth: n("queue_depth"),
        })
    }

    pub async fn probe_forever(&self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            self.probe().await;
        }
    }

    /// The static bearer for a worker configured in the catalog: it may be an engine of another make
    /// (llama-server) that cannot check a signature. None for announced workers: they are runaii
    /// workers, which check the request's signature, and the weaker token is not put on the wire for them.
    #[must_use]
    pub fn configured_bearer(&self, url: &str) -> Option<String> {
        let view = self.view.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        view.probed.iter().any(|(status, _)| status.url == url).then(|| self.secrets.bearer_header())
    }
}
