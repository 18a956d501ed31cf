//! Announcing this worker in the Redis registry the gateways read: every couple of seconds, a signed
//! status (`runaii_wire::announcement`) in this worker's field of the registry hash, good for a few
//! seconds, so a worker that dies or hangs drops out of routing by itself. On shutdown the field is
//! removed at once.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::AsyncCommands;
use runaii_wire::announcement::{self, WorkerStatus, REGISTRY_KEY};
use runaii_wire::redis_link::Target;
use runaii_wire::worker_auth::{SecretText, WorkerSecrets};

use crate::engine::Loaded;

const EVERY: Duration = Duration::from_secs(2);
/// Three missed heartbeats and the announcement no longer counts.
const LIFETIME_MS: u64 = 6_000;
/// Bounds connecting and each command, so a hung Redis never holds up the next heartbeat for long.
const REDIS_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Announcer {
    /// May hold a password: `Debug` prints it redacted.
    pub redis_url: SecretText,
    pub advertise_url: String,
    pub model_id: String,
    pub secrets: WorkerSecrets,
    pub loaded: Arc<OnceLock<Arc<Loaded>>>,
}

impl Announcer {
    /// Runs until shutdown; a Redis outage is logged and retried, never fatal.
    pub async fn run(self) {
        // One server, or a Redis Cluster when the URL lists several nodes: the same rule as the gateways'.
        let target = match Target::open(self.redis_url.expose(), REDIS_TIMEOUT) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(error = %e, "bad redis url; not announcing");
                return;
            }
        };
        let field = announcement::field(&self.model_id, &self.advertise_url);
        let mut tick = tokio::time::interval(EVERY);
        let mut connection = None;
        let shutdown = runaii_wire::shutdown::signal();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = &mut shutdown => break,
            }
            let Some(loaded) = self.loaded.get() else { continue };
            if connection.is_none() {
                connection = target.connect(REDIS_TIMEOUT).await.map_err(|e| tracing::warn!(error = %e, "redis unreachable")).ok();
            }
            let Some(conn) = connection.as_mut() else { continue };
            let status = WorkerStatus {
                url: self.advertise_url.clone(),
                model: self.model_id.clone(),
                slots: u64::from(loaded.settings.slots),
                slots_busy: loaded.stats.active_slots.load(Ordering::Relaxed),
                queue_depth: loaded.queue_depth() as u64,
            };
            let value = announcement::seal(&self.secrets, status, announcement::now_ms() + LIFETIME_MS);
            let set: redis::RedisResult<()> = conn.hset(REGISTRY_KEY, &field, value).await;
            if let Err(e) = set {
                tracing::warn!(error = %e, "announce failed; reconnecting");
                connection = None;
            }
        }
        // Leaving: gateways stop routing here at their next refresh instead of when the status expires.
        if let Some(conn) = connection.as_mut() {
            let _: redis::RedisResult<()> = conn.hdel(REGISTRY_KEY, &field).await;
        }
    }
}
