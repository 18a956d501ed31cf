//! How many requests a tenant has in flight, over every replica: each tenant has a cap
//! (`tenants.max_concurrent_requests`), and a request past it is a 429 with `retry-after` in the route's
//! dialect, before its body is read. So one tenant's flood waits at its own door and never fills a
//! model's queues in front of the other tenants (whose turns the worker then keeps fair, see the
//! worker's `engine/queue.rs`).
//!
//! Each request in flight holds a lease in Redis: a member of its tenant's sorted set, scored with its
//! expiry on Redis's clock (`leases_v1.lua`). Taking one is one script call, which drops lapsed leases,
//! counts and adds. While the request runs its lease is renewed every [`RENEW_EVERY`]; when the request's
//! answer has been sent (or dropped) the lease is given back. A replica that dies stops renewing: its
//! leases lapse within [`LEASE`] and the tenant's count is right again without anyone cleaning up.
//!
//! While Redis is unavailable each replica counts the tenant's requests it serves itself against its
//! share of the cap (the cap divided by the live replicas it knows of, at least one): the replicas
//! together still admit about the cap, never unlimited.

mod held;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::task::TaskTracker;
use uuid::Uuid;

pub use held::hold;

use crate::error::ApiError;
use crate::redis_link::RedisLink;

/// Bump with any change to the script's keys or state layout.
const VERSION: &str = "v1";
static SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(include_str!("leases_v1.lua")));

/// How long a lease lives without renewal: how long a dead replica's requests still count.
pub const LEASE: Duration = Duration::from_secs(30);
/// How often a running request renews its lease.
pub const RENEW_EVERY: Duration = Duration::from_secs(10);

/// The tenants' requests in flight, as this replica takes and gives them.
#[derive(Debug)]
pub struct Concurrency {
    redis: Arc<RedisLink>,
    /// This replica's own requests in flight, by tenant: the count while Redis is unavailable.
    local: Mutex<HashMap<Uuid, u32>>,
    /// Where leases are given back, so graceful shutdown waits for them.
    tasks: TaskTracker,
    /// The live gateway replicas this one knows of (itself included), for its share without Redis.
    replicas: AtomicU32,
}

/// One request's place in its tenant's count; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    owner: Arc<Concurrency>,
    tenant: Uuid,
    /// The lease in Redis and the task renewing it; `None` when it was counted here alone.
    lease: Option<(String, tokio::task::JoinHandle<()>)>,
}

impl Concurrency {
    #[must_use]
    pub fn new(redis: Arc<RedisLink>, tasks: TaskTracker) -> Arc<Self> {
        Arc::new(Self { redis, local: Mutex::default(), tasks, replicas: AtomicU32::new(1) })
    }

    /// How many gateway replicas are alive, this one included.
    pub fn set_replicas(&self, n: u32) {
        self.replicas.store(n.max(1), Ordering::Relaxed);
    }

    /// Takes a place for one of `tenant`'s requests if it has fewer than `cap` in flight.
    ///
    /// # Errors
    /// [`ApiError::ConcurrencyLimited`] when the tenant's requests in flight are at its cap.
    #[tracing::instrument(name = "concurrency", skip_all)]
    pub async fn acquire(self: &Arc<Self>, tenant: Uuid, cap: u32) -> Result<Slot, ApiError> {
        let id = Uuid::now_v7().simple().to_string();
        let taken = self.call(tenant, "take", &id, cap).await;
        let counted_here = {
            let mut local = self.local();
            let mine = local.entry(tenant).or_default();
            // Redis said no, or Redis is down and this replica is at its share of the cap.
            let share = (cap / self.replicas.load(Ordering::Relaxed).max(1)).max(1);
            let admitted = taken.map_or(*mine < share, |taken| taken == 1);
            if admitted {
                *mine += 1;
            }
            admitted
        };
        if !counted_here {
            crate::metrics::global().concurrency_refusals.add(&[if taken.is_some() { "redis" } else { "local" }], 1);
            return Err(ApiError::ConcurrencyLimited { limit: cap });
        }
        let lease = taken.map(|_| {
            let renewer = Arc::clone(self);
            let renewing_id = id.clone();
            let renew = tokio::spawn(async move {
                let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + RENEW_EVERY, RENEW_EVERY);
                loop {
                    tick.tick().await;
                    renewer.call(tenant, "renew", &renewing_id, cap).await;
                }
            });
            (id, renew)
        });
        Ok(Slot { owner: Arc::clone(self), tenant, lease })
    }

    fn local(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, u32>> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One script call; `None` when Redis is unavailable.
    async fn call(&self, tenant: Uuid, mode: &'static str, id: &str, cap: u32) -> Option<i64> {
        let key = format!("runaii:inflight:{VERSION}:{{{tenant}}}");
        let lease_ms = u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX);
        self.redis
            .run(|mut redis| async move { SCRIPT.key(key).arg(mode).arg(id).arg(lease_ms).arg(cap).invoke_async::<i64>(&mut redis).await })
            .await
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        {
            let mut local = self.owner.local();
            if let Some(mine) = local.get_mut(&self.tenant) {
                *mine = mine.saturating_sub(1);
                if *mine == 0 {
                    local.remove(&self.tenant);
                }
            }
        }
        let Some((id, renew)) = self.lease.take() else { return };
        renew.abort();
        let (owner, tenant) = (Arc::clone(&self.owner), self.tenant);
        // Given back in a tracked task: a lease not given back lapses within `LEASE`, but until then it
        // counts against the tenant.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            self.owner.tasks.spawn_on(
                async move {
                    owner.call(tenant, "give", &id, 0).await;
                },
                &runtime,
            );
        }
    }
}
