//! Announcing this worker in the Redis registry the gateways read: every couple of seconds, a JSON
//! status under `runaii:worker:<model>:<url>` with a TTL, so a worker that dies or hangs drops out of
//! routing by itself within seconds.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::json;

use crate::engine::Loaded;

const EVERY: Duration = Duration::from_secs(2);
/// Three missed heartbeats and the entry is gone.
const TTL_SECS: u64 = 6;

/// Runs forever; a Redis outage is logged and retried, never fatal.
pub async fn announce(redis_url: String, advertise_url: String, model_id: String, loaded: Arc<OnceLock<Arc<Loaded>>>) {
    let key = format!("runaii:worker:{model_id}:{advertise_url}");
    let client = match redis::Client::open(redis_url.as_str()) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "bad redis url; not announcing");
            return;
        }
    };
    let mut tick = tokio::time::interval(EVERY);
    let mut connection = None;
    loop {
        tick.tick().await;
        let Some(loaded) = loaded.get() else { continue };
        if connection.is_none() {
            connection = client.get_multiplexed_async_connection().await.map_err(|e| tracing::warn!(error = %e, "redis unreachable")).ok();
        }
        let Some(conn) = connection.as_mut() else { continue };
        let status = json!({
            "url": advertise_url,
            "model": model_id,
            "slots": loaded.settings.slots,
            "slots_busy": loaded.stats.active_slots.load(Ordering::Relaxed),
            "queue_depth": loaded.queue_depth(),
        });
        let set: redis::RedisResult<()> = conn.set_ex(&key, status.to_string(), TTL_SECS).await;
        if let Err(e) = set {
            tracing::warn!(error = %e, "announce failed; reconnecting");
            connection = None;
        }
    }
}
