//! A Redis connection that survives Redis going away. Each use of Redis (the rate limiter, the worker
//! registry, console sessions) opens its own link, so they do not share fate: a failure one of them meets
//! (a slow `HGETALL`, a key of the wrong type) never makes another skip Redis.
//!
//! `ConnectionManager` reconnects by itself once it exists, but it cannot be created while Redis is
//! down: a gateway that started during an outage would never use Redis again. `RedisLink` creates it
//! on first use instead, at most once a second, and every command is bounded by a short timeout so an
//! unreachable Redis costs a request milliseconds, not seconds. Only a failure to reach Redis (refused,
//! dropped, timed out, a cluster without its nodes) makes the link skip Redis for a second; an error Redis
//! answers about one command (`WRONGTYPE`, a script's error) fails that command alone. A URL listing
//! several nodes is a Redis Cluster (`runaii_wire::redis_link`); the rest of the gateway does not know
//! which it has.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use runaii_wire::redis_link::{Connection, Target};

/// How long one Redis round trip may take before it counts as Redis being unavailable.
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(250);
/// Connection attempts are spaced at least this far apart while Redis is down.
const RECONNECT_EVERY: Duration = Duration::from_secs(1);

pub struct RedisLink {
    target: Target,
    state: Mutex<Link>,
    connecting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Link {
    manager: Option<Connection>,
    /// When Redis last failed; for [`RECONNECT_EVERY`] after it, callers skip Redis without waiting.
    failed_at: Option<Instant>,
}

impl std::fmt::Debug for RedisLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLink").finish_non_exhaustive()
    }
}

impl RedisLink {
    /// # Errors
    /// A malformed Redis URL. An unreachable Redis is not an error here.
    pub async fn new(url: &str) -> anyhow::Result<Self> {
        let link = Self { target: Target::open(url, COMMAND_TIMEOUT)?, state: Mutex::default(), connecting: tokio::sync::Mutex::new(()) };
        if link.connection().await.is_none() {
            tracing::warn!("redis unreachable at start; will retry on use");
        }
        Ok(link)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Link> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True within [`RECONNECT_EVERY`] of a failure.
    fn backing_off(&self) -> bool {
        self.lock().failed_at.is_some_and(|at| at.elapsed() < RECONNECT_EVERY)
    }

    fn failed(&self) {
        self.lock().failed_at = Some(Instant::now());
    }

    /// A connection, or `None` while Redis is unreachable.
    pub async fn connection(&self) -> Option<Connection> {
        if let Some(manager) = self.lock().manager.clone() {
            return Some(manager);
        }
        // One task connects; the others wait for its result instead of piling up attempts.
        let _guard = self.connecting.lock().await;
        if let Some(manager) = self.lock().manager.clone() {
            return Some(manager);
        }
        if self.backing_off() {
            return None;
        }
        let made = tokio::time::timeout(COMMAND_TIMEOUT * 2, self.target.connect(COMMAND_TIMEOUT)).await;
        match made {
            Ok(Ok(manager)) => {
                tracing::info!("redis connected");
                *self.lock() = Link { manager: Some(manager.clone()), failed_at: None };
                Some(manager)
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "redis unreachable");
                self.failed();
                None
            }
            Err(_) => {
                tracing::warn!("redis did not answer");
                self.failed();
                None
            }
        }
    }

    /// Runs one command with the timeout; `None` when Redis is unavailable or refused the command. After a
    /// failure to reach Redis, calls on this link skip Redis for a second (the connection manager
    /// reconnects meanwhile), so an outage adds no latency.
    pub async fn run<T, F, Fut>(&self, command: F) -> Option<T>
    where
        F: FnOnce(Connection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        if self.backing_off() {
            return None;
        }
        let connection = self.connection().await?;
        match tokio::time::timeout(COMMAND_TIMEOUT, command(connection)).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) if unreachable(&e) => {
                tracing::warn!(error = %e, "redis command failed");
                self.failed();
                None
            }
            // Redis answered, with an error about this command: the link is fine.
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "redis refused a command");
                None
            }
            Err(_) => {
                tracing::warn!("redis command timed out");
                self.failed();
                None
            }
        }
    }
}

/// Whether an error means Redis could not be reached (rather than an answer about one command).
fn unreachable(e: &redis::RedisError) -> bool {
    use redis::ErrorKind;
    e.is_io_error()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            ErrorKind::ClusterDown
                | ErrorKind::MasterDown
                | ErrorKind::TryAgain
                | ErrorKind::BusyLoadingError
                | ErrorKind::ClusterConnectionNotFound
                | ErrorKind::AuthenticationFailed
        )
}
