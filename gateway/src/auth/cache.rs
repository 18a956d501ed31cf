//! Key lookups cached for a short time, so a hot key does not hit Postgres on every request while a
//! revoked key still stops working within the TTL on every replica.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::db::keys::{self, KeyRow};

#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Option<KeyRow>)>>,
}

/// Entries kept at most; past this the cache is cleared (lookups are cheap, memory is bounded).
const MAX_ENTRIES: usize = 100_000;

impl KeyCache {
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()) }
    }

    /// # Errors
    /// Database errors.
    pub async fn lookup(&self, db: &PgPool, public_id: &str) -> Result<Option<KeyRow>, sqlx::Error> {
        {
            let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some((at, row)) = entries.get(public_id) {
                if at.elapsed() < self.ttl {
                    return Ok(row.clone());
                }
            }
        }
        let row = keys::find(db, public_id).await?;
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(public_id.to_owned(), (Instant::now(), row.clone()));
        Ok(row)
    }
}
