//! Which workers are ready. Two sources:
//!
//! - workers that announce themselves in Redis (`runaii:worker:<model>:<url>`, a JSON status with a
//!   heartbeat TTL: a worker that stops announcing disappears within seconds);
//! - workers configured in the database (`model_workers`), probed on `/health` by every replica.
//!
//! The probe results are a local cache each replica rebuilds by itself; nothing here is state another
//! replica needs.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::redis_link::RedisLink;

pub const KEY_PREFIX: &str = "runaii:worker:";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkerStatus {
    pub url: String,
    pub model: String,
    pub slots: u64,
    pub slots_busy: u64,
    pub queue_depth: u64,
}

impl WorkerStatus {
    /// Lower is less loaded: work in flight per slot.
    #[must_use]
    pub fn load(&self) -> f64 {
        (self.slots_busy + self.queue_depth) as f64 / self.slots.max(1) as f64
    }
}

pub struct Registry {
    redis: Arc<RedisLink>,
    db: PgPool,
    http: reqwest::Client,
    probed: RwLock<HashMap<(String, String), WorkerStatus>>,
}

/// Escapes Redis glob metacharacters so a model id matches only itself.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    #[must_use]
    pub fn new(redis: Arc<RedisLink>, db: PgPool, http: reqwest::Client) -> Self {
        Self { redis, db, http, probed: RwLock::new(HashMap::new()) }
    }

    /// Ready workers of one model, least loaded first.
    pub async fn ready(&self, model: &str) -> Vec<WorkerStatus> {
        let mut workers: Vec<WorkerStatus> = self.announced(Some(model)).await.into_iter().filter(|w| w.model == model).collect();
        let probed = self.probed.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        for status in probed.values().filter(|w| w.model == model) {
            if !workers.iter().any(|w| w.url == status.url) {
                workers.push(status.clone());
            }
        }
        workers.sort_by(|a, b| a.load().total_cmp(&b.load()));
        workers
    }

    /// Every ready worker of every model: announced ones, then probed ones not also announced.
    pub async fn all_ready(&self) -> Vec<WorkerStatus> {
        let mut workers = self.announced(None).await;
        let probed = self.probed.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        for status in probed.values() {
            if !workers.iter().any(|w| w.url == status.url && w.model == status.model) {
                workers.push(status.clone());
            }
        }
        workers
    }

    /// Models with at least one ready worker.
    pub async fn ready_models(&self) -> HashSet<String> {
        self.all_ready().await.into_iter().map(|w| w.model).collect()
    }

    /// Announced workers, of one model or of all. Scoping the scan to the model keeps the per-request
    /// lookup from reading every worker of every model.
    async fn announced(&self, model: Option<&str>) -> Vec<WorkerStatus> {
        let pattern = match model {
            Some(model) => format!("{KEY_PREFIX}{}:*", glob_escape(model)),
            None => format!("{KEY_PREFIX}*"),
        };
        // When Redis is unavailable only the configured workers are used.
        let values = self
            .redis
            .run(|mut redis| async move {
                let keys: Vec<String> = {
                    use futures::StreamExt;
                    redis.scan_match::<_, String>(&pattern).await?.collect().await
                };
                if keys.is_empty() {
                    return Ok(Vec::new());
                }
                redis.mget::<_, Vec<Option<String>>>(&keys).await
            })
            .await
            .unwrap_or_default();
        values.into_iter().flatten().filter_map(|v| serde_json::from_str(&v).ok()).collect()
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
        let mut fresh = HashMap::new();
        for (model, url) in configured {
            if let Some(status) = self.probe_one(&model, &url).await {
                fresh.insert((model, url), status);
            }
        }
        *self.probed.write().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
    }

    async fn probe_one(&self, model: &str, url: &str) -> Option<WorkerStatus> {
        let response = self.http.get(format!("{url}/health")).timeout(Duration::from_secs(1)).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        let health: serde_json::Value = response.json().await.ok()?;
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

    /// Marks a configured worker as down at once (it failed a request), until the next probe says otherwise.
    pub fn mark_down(&self, url: &str) {
        self.probed.write().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|(_, u), _| u != url);
    }

    pub async fn probe_forever(&self, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            self.probe().await;
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn glob_escape_keeps_ids_literal() {
        assert_eq!(super::glob_escape("org/model-1"), "org/model-1");
        assert_eq!(super::glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
