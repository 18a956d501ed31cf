//! Key lookups cached, so a key does not hit Postgres on every request. A change to a key (revoked,
//! expiry, limits) notifies every replica in its transaction and the entry is dropped at once
//! (`changes.rs`); the TTL is the backstop. While the replica is not listening (its listener is
//! reconnecting, and notices sent meanwhile are lost) an entry is trusted for one second at most.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::db::keys::{self, KeyRow};

#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    entries: Mutex<HashMap<String, (Instant, Option<KeyRow>)>>,
    /// Whether changes are being heard: only then is an entry trusted for the whole TTL.
    listening: AtomicBool,
    /// Bumped by every eviction: a lookup that read the database before an eviction does not cache what
    /// it read (the row may be the one the change replaced).
    generation: AtomicU64,
}

/// How long an entry is trusted while changes are not being heard.
const UNHEARD_TTL: Duration = Duration::from_secs(1);

/// Entries kept at most; past this the cache is cleared (lookups are cheap, memory is bounded).
const MAX_ENTRIES: usize = 100_000;

impl KeyCache {
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self { ttl, entries: Mutex::new(HashMap::new()), listening: AtomicBool::new(false), generation: AtomicU64::new(0) }
    }

    /// Whether changes are being heard; either way the entries cached so far are dropped (a notice may
    /// have been missed).
    pub fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.lock().clear();
    }

    /// Drops the entry of a key that changed.
    pub fn evict(&self, public_id: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.lock().remove(public_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Option<KeyRow>)>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// # Errors
    /// Database errors.
    pub async fn lookup(&self, db: &PgPool, public_id: &str) -> Result<Option<KeyRow>, sqlx::Error> {
        let ttl = if self.listening.load(Ordering::Acquire) { self.ttl } else { self.ttl.min(UNHEARD_TTL) };
        if let Some((at, row)) = self.lock().get(public_id) {
            if at.elapsed() < ttl {
                return Ok(row.clone());
            }
        }
        let generation = self.generation.load(Ordering::Acquire);
        let row = keys::find(db, public_id).await?;
        let mut entries = self.lock();
        if self.generation.load(Ordering::Acquire) != generation {
            return Ok(row);
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(public_id.to_owned(), (Instant::now(), row.clone()));
        Ok(row)
    }
}
