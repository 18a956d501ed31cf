//! Credit held without a round trip. Each replica leases a slice of a tenant's available credit
//! (`db::leases`: moved into `tenants.reserved`, so leases across replicas can never sum past the
//! balance) and holds each request's worst-case cost against its slice in memory. The record of a
//! request takes its charge out of the slice (`db::costs::settle`), and the slice is topped up in the
//! background when it runs low. A tenant whose available credit is too small for a useful slice gets
//! today's exact per-request hold (`db::credits::hold`) instead.
//!
//! A slice is sized for the tenant's demand on this replica: `SLICE_WINDOWS` windows' worth of the
//! worst cases held in the busiest recent window, and never less than `REQUESTS_PER_SLICE` requests like
//! the one asking. A busy tenant's slice so lasts a couple of seconds between top-ups, whatever its rate
//! (sized by request count alone, a top-up every 32 requests was 0.03 Postgres transactions per request).
//!
//! Slices go back when idle for a minute (housekeeping), at graceful shutdown, and, when a replica
//! dies, through the other replicas (`db::replicas::release_orphaned_holds`). A replica that was only
//! presumed dead (it lost the database for longer than the replicas' timeout) finds its leases released
//! when it comes back: [`Leases::forget`] drops its slices, and the requests held against them settle
//! as if unheld (a new epoch).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

use crate::db::leases;

/// A slice is sized for at least this many requests like the one that asked for it.
const REQUESTS_PER_SLICE: u32 = 64;
/// The window demand is measured over.
const WINDOW: Duration = Duration::from_secs(1);
/// A slice is sized for this many windows of the tenant's demand.
const SLICE_WINDOWS: u32 = 2;
/// A slice takes at most this fraction of the tenant's available credit, so replicas share it.
const SHARE_OF_AVAILABLE: Decimal = Decimal::from_parts(25, 0, 0, false, 2);
/// A slice smaller than this many requests is not worth a lease: the tenant gets exact holds.
const LEAST_REQUESTS: u32 = 2;

/// How a request's worst-case cost is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A `credit_holds` row of its own.
    Exact,
    /// Against this replica's lease of the tenant's credit, for `worst`, taken in `epoch` (see
    /// [`Leases::forget`]).
    Leased { worst: Decimal, epoch: u64 },
}

#[derive(Debug)]
struct Slice {
    /// As much as the lease row holds (this replica is its only writer).
    granted: Decimal,
    /// The worst cases of the requests held against it now.
    in_flight: Decimal,
    /// A top-up is on its way.
    taking: bool,
    last_used: Instant,
    demand: Demand,
}

impl Slice {
    fn new(now: Instant) -> Self {
        Self { granted: Decimal::ZERO, in_flight: Decimal::ZERO, taking: false, last_used: now, demand: Demand::new(now) }
    }

    fn free(&self) -> Decimal {
        self.granted - self.in_flight
    }
}

/// The worst cases held against a slice per [`WINDOW`]: the current window's, and the last full one's.
#[derive(Debug)]
struct Demand {
    since: Instant,
    current: Decimal,
    last: Decimal,
}

impl Demand {
    fn new(now: Instant) -> Self {
        Self { since: now, current: Decimal::ZERO, last: Decimal::ZERO }
    }

    /// Counts a request's worst case at `now`.
    fn add(&mut self, worst: Decimal, now: Instant) {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= WINDOW {
            // A window with no request in between means the demand of the last one is gone.
            self.last = if elapsed < WINDOW * 2 { self.current } else { Decimal::ZERO };
            self.current = Decimal::ZERO;
            self.since = now;
        }
        self.current += worst;
    }

    /// What a slice should hold for this demand and a request of `worst`.
    fn wanted(&self, worst: Decimal) -> Decimal {
        (worst * Decimal::from(REQUESTS_PER_SLICE)).max(self.last.max(self.current) * Decimal::from(SLICE_WINDOWS))
    }
}

/// This replica's leases.
#[derive(Debug)]
pub struct Leases {
    db: PgPool,
    replica: Uuid,
    slices: Mutex<HashMap<Uuid, Slice>>,
    /// Bumped when the slices are forgotten: a request held in an earlier epoch is no longer held.
    epoch: AtomicU64,
    /// Top-ups take it shared, [`Leases::forget`] alone: a lease taken while the slices are forgotten
    /// is seen to belong to the old epoch, and goes back.
    topping_up: tokio::sync::RwLock<()>,
    top_ups: AtomicU64,
}

impl Leases {
    #[must_use]
    pub fn new(db: PgPool, replica: Uuid) -> Self {
        Self {
            db,
            replica,
            slices: Mutex::default(),
            epoch: AtomicU64::new(0),
            topping_up: tokio::sync::RwLock::new(()),
            top_ups: AtomicU64::new(0),
        }
    }

    /// Whether a request held in `epoch` is still held against a lease.
    #[must_use]
    pub fn holds(&self, epoch: u64) -> bool {
        self.epoch.load(Ordering::Acquire) == epoch
    }

    /// Leases this replica has asked for (each a Postgres transaction).
    #[must_use]
    pub fn top_ups(&self) -> u64 {
        self.top_ups.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Slice>> {
        self.slices.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Holds `worst` against the tenant's slice when it has room. When the slice runs low (or there is
    /// none yet) a top-up is asked for in the background; meanwhile the caller holds exactly (`None`).
    pub fn try_hold(self: &Arc<Self>, tenant: Uuid, worst: Decimal) -> Option<Held> {
        let now = Instant::now();
        let (held, top_up) = {
            let mut slices = self.lock();
            let epoch = self.epoch.load(Ordering::Acquire);
            let slice = slices.entry(tenant).or_insert_with(|| Slice::new(now));
            slice.last_used = now;
            slice.demand.add(worst, now);
            let held = (slice.free() >= worst).then_some(Held::Leased { worst, epoch });
            if held.is_some() {
                slice.in_flight += worst;
            }
            let wanted = slice.demand.wanted(worst);
            let top_up = (!slice.taking && slice.free() < wanted / Decimal::TWO).then_some((wanted, epoch));
            slice.taking |= top_up.is_some();
            (held, top_up)
        };
        if let Some((wanted, epoch)) = top_up {
            let leases = Arc::clone(self);
            let least = worst * Decimal::from(LEAST_REQUESTS);
            tokio::spawn(async move { leases.top_up(tenant, least, wanted, epoch).await });
        }
        held
    }

    async fn top_up(&self, tenant: Uuid, least: Decimal, wanted: Decimal, epoch: u64) {
        let _taking = self.topping_up.read().await;
        if !self.holds(epoch) {
            return;
        }
        self.top_ups.fetch_add(1, Ordering::Relaxed);
        let taken = leases::take(&self.db, tenant, self.replica, (SHARE_OF_AVAILABLE, least, wanted)).await;
        let outcome = match &taken {
            Ok(amount) if amount.is_zero() => "none",
            Ok(_) => "taken",
            Err(_) => "failed",
        };
        crate::metrics::global().credit_lease_top_ups.add(&[outcome], 1);
        let mut slices = self.lock();
        let Some(slice) = slices.get_mut(&tenant) else { return };
        slice.taking = false;
        match taken {
            Ok(amount) => slice.granted += amount,
            Err(e) => tracing::warn!(error = %e, "credit lease not topped up; requests hold exactly meanwhile"),
        }
    }

    /// A request held against the slice was recorded: its worst case is free again, and what its record
    /// took from the lease (`from_lease`) is gone from it. Nothing for a request of a forgotten epoch.
    pub fn settled(&self, tenant: Uuid, held: Held, from_lease: Decimal) {
        let Held::Leased { worst, epoch } = held else { return };
        let mut slices = self.lock();
        if !self.holds(epoch) {
            return;
        }
        if let Some(slice) = slices.get_mut(&tenant) {
            slice.in_flight -= worst;
            slice.granted -= from_lease;
        }
    }

    /// Forgets every slice, after this replica was presumed dead and its leases released by the others
    /// (its heartbeat found its row gone). Whatever lease rows it still has are given back; requests held
    /// against the old slices settle as unheld, charged from what the tenant has available.
    ///
    /// # Errors
    /// Database errors: the rows then go when this replica stops, or is presumed dead again.
    pub async fn forget(&self) -> Result<(), sqlx::Error> {
        let _alone = self.topping_up.write().await;
        {
            let mut slices = self.lock();
            self.epoch.fetch_add(1, Ordering::AcqRel);
            slices.clear();
        }
        let mut tx = self.db.begin().await?;
        leases::give_back_all(&mut tx, &[self.replica]).await?;
        tx.commit().await
    }

    /// Gives back the slices no request has used for `idle`.
    pub async fn give_back_idle(&self, idle: Duration) {
        let idle: Vec<(Uuid, Decimal)> = {
            let mut slices = self.lock();
            let gone: Vec<Uuid> = slices
                .iter()
                .filter(|(_, s)| !s.taking && s.in_flight.is_zero() && s.last_used.elapsed() >= idle)
                .map(|(tenant, _)| *tenant)
                .collect();
            gone.into_iter().filter_map(|t| slices.remove(&t).map(|s| (t, s.granted))).filter(|(_, amount)| !amount.is_zero()).collect()
        };
        for (tenant, amount) in idle {
            if let Err(e) = leases::give_back(&self.db, tenant, self.replica, amount).await {
                tracing::warn!(error = %e, "idle credit lease not given back; it goes when this replica stops");
            }
        }
    }

    /// Gives back every slice (graceful shutdown, once every request has settled).
    ///
    /// # Errors
    /// Database errors: the leases then go when the other replicas see this one gone.
    pub async fn give_back_all(&self) -> Result<(), sqlx::Error> {
        let _alone = self.topping_up.write().await;
        self.lock().clear();
        let mut tx = self.db.begin().await?;
        leases::give_back_all(&mut tx, &[self.replica]).await?;
        tx.commit().await
    }
}
