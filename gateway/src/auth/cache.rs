//! Key lookups cached, so a key does not hit Postgres on every request. A change to a key (created,
//! revoked, expiry, limits) notifies every replica in its transaction and the entry is dropped at once
//! (`changes.rs`); the TTL is the backstop. While the replica is not listening (its listener is
//! reconnecting, and notices sent meanwhile are lost) an entry is trusted for one second at most.
//!
//! Two bounded tables, each evicting its least recently used entry when full and never wiped for being
//! full: the keys that exist, and the public ids the database did not know (the negative cache). Kept
//! apart, a flood of made-up ids can only push out other made-up ids, never a key in use.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hashlink::LruCache;
use sqlx::PgPool;

use crate::db::keys::{self, KeyRow};

/// What the cache knows of a public id without asking the database.
#[derive(Debug, Clone)]
pub enum Cached {
    /// Looked up within the TTL: the row, or `None` for an id the database did not know.
    Fresh(Option<KeyRow>),
    /// A key that existed when last looked up, longer ago than the TTL.
    Stale,
    /// Never looked up, or forgotten.
    Unknown,
}

#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    found: Mutex<LruCache<String, (Instant, KeyRow)>>,
    missing: Mutex<LruCache<String, Instant>>,
    /// Whether changes are being heard: only then is an entry trusted for the whole TTL.
    listening: AtomicBool,
    /// Bumped by every eviction: a lookup that read the database before an eviction does not cache what
    /// it read (the row may be the one the change replaced).
    generation: AtomicU64,
}

/// How long an entry is trusted while changes are not being heard.
const UNHEARD_TTL: Duration = Duration::from_secs(1);

impl KeyCache {
    #[must_use]
    pub fn new(ttl: Duration, capacity: NonZeroUsize) -> Self {
        Self {
            ttl,
            found: Mutex::new(LruCache::new(capacity.get())),
            missing: Mutex::new(LruCache::new(capacity.get())),
            listening: AtomicBool::new(false),
            generation: AtomicU64::new(0),
        }
    }

    /// Whether changes are being heard; either way the entries cached so far are dropped (a notice may
    /// have been missed).
    pub fn set_listening(&self, listening: bool) {
        self.listening.store(listening, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
        lock(&self.found).clear();
        lock(&self.missing).clear();
    }

    /// Drops the entries of a key that changed (or was just created).
    pub fn evict(&self, public_id: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        lock(&self.found).remove(public_id);
        lock(&self.missing).remove(public_id);
    }

    fn ttl(&self) -> Duration {
        if self.listening.load(Ordering::Acquire) {
            self.ttl
        } else {
            self.ttl.min(UNHEARD_TTL)
        }
    }

    /// What is known of `public_id` without I/O.
    pub fn cached(&self, public_id: &str) -> Cached {
        let ttl = self.ttl();
        if let Some((at, row)) = lock(&self.found).get(public_id) {
            return if at.elapsed() < ttl { Cached::Fresh(Some(row.clone())) } else { Cached::Stale };
        }
        match lock(&self.missing).get(public_id) {
            Some(at) if at.elapsed() < ttl => Cached::Fresh(None),
            _ => Cached::Unknown,
        }
    }

    /// Reads the key from the database and remembers what was read, found or not.
    ///
    /// # Errors
    /// Database errors.
    pub async fn load(&self, db: &PgPool, public_id: &str) -> Result<Option<KeyRow>, sqlx::Error> {
        let generation = self.generation.load(Ordering::Acquire);
        let row = keys::find(db, public_id).await?;
        // Both locks are taken in this order everywhere, and held together only here.
        let mut found = lock(&self.found);
        let mut missing = lock(&self.missing);
        if self.generation.load(Ordering::Acquire) != generation {
            return Ok(row);
        }
        match &row {
            Some(row) => {
                missing.remove(public_id);
                found.insert(public_id.to_owned(), (Instant::now(), row.clone()));
            }
            None => {
                found.remove(public_id);
                missing.insert(public_id.to_owned(), Instant::now());
            }
        }
        Ok(row)
    }

    /// The cached answer when fresh, otherwise the database's.
    ///
    /// # Errors
    /// Database errors.
    pub async fn lookup(&self, db: &PgPool, public_id: &str) -> Result<Option<KeyRow>, sqlx::Error> {
        match self.cached(public_id) {
            Cached::Fresh(row) => Ok(row),
            Cached::Stale | Cached::Unknown => self.load(db, public_id).await,
        }
    }
}

fn lock<T>(table: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
