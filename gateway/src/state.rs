//! Shared state: connections and caches. Nothing here is needed by another replica.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use crate::auth::KeyCache;
use crate::config::Settings;
use crate::upstream::Registry;

#[derive(Debug, Clone)]
pub struct AppState {
    pub db: PgPool,
    pub keys: Arc<KeyCache>,
    pub registry: Arc<Registry>,
    pub http: reqwest::Client,
    pub settings: Arc<Settings>,
}

impl AppState {
    /// # Errors
    /// When Postgres or Redis cannot be reached at start.
    pub async fn new(settings: Settings) -> anyhow::Result<Self> {
        let db = crate::db::connect(&settings.db).await?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        let registry = Arc::new(Registry::connect(&settings.redis_url, db.clone(), http.clone()).await?);
        Ok(Self {
            keys: Arc::new(KeyCache::new(Duration::from_millis(settings.key_cache_ms))),
            db,
            registry,
            http,
            settings: Arc::new(settings),
        })
    }
}
