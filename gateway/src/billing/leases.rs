//! Credit held without a round trip. Each replica leases a slice of a tenant's available credit
//! (`db::leases`: moved into `tenants.reserved`, so leases across replicas can never sum past the
//! balance) and holds each request's worst-case cost against its slice in memory. The record of a
//! request takes its charge out of the slice (`db::costs::settle`), and the slice is topped up in the
//! background when it runs low. A tenant whose available credit is too small for a useful slice gets
//! today's exact per-request hold (`db::credits::hold`) instead.
//!
//! Slices go back when idle for a minute (housekeeping), at graceful shutdown, and, when a replica
//! dies, through the other replicas (`db::replicas::release_orphaned_holds`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use sqlx::PgPool;
use uuid::Uuid;

use crate::db::leases;

/// A slice is sized for this many requests like the one that asked for it.
const REQUESTS_PER_SLICE: u32 = 64;
/// A slice takes at most this fraction of the tenant's available credit, so replicas share it.
const SHARE_OF_AVAILABLE: Decimal = Decimal::from_parts(25, 0, 0, false, 2);
/// A slice smaller than this many requests is not worth a lease: the tenant gets exact holds.
const LEAST_REQUESTS: u32 = 2;

/// How a request's worst-case cost is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A `credit_holds` row of its own.
    Exact,
    /// Against this replica's lease of the tenant's credit, for this much.
    Leased(Decimal),
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
}

impl Slice {
    fn free(&self) -> Decimal {
        self.granted - self.in_flight
    }
}

/// This replica's leases.
#[derive(Debug)]
pub struct Leases {
    db: PgPool,
    replica: Uuid,
    slices: Mutex<HashMap<Uuid, Slice>>,
}

impl Leases {
    #[must_use]
    pub fn new(db: PgPool, replica: Uuid) -> Self {
        Self { db, replica, slices: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Slice>> {
        self.slices.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Holds `worst` against the tenant's slice when it has room. When the slice runs low (or there is
    /// none yet) a top-up is asked for in the background; meanwhile the caller holds exactly.
    pub fn try_hold(self: &Arc<Self>, tenant: Uuid, worst: Decimal) -> bool {
        let wanted = worst * Decimal::from(REQUESTS_PER_SLICE);
        let (held, top_up) = {
            let mut slices = self.lock();
            let slice = slices.entry(tenant).or_insert_with(|| Slice {
                granted: Decimal::ZERO,
                in_flight: Decimal::ZERO,
                taking: false,
                last_used: Instant::now(),
            });
            slice.last_used = Instant::now();
            let held = slice.free() >= worst;
            if held {
                slice.in_flight += worst;
            }
            let top_up = !slice.taking && slice.free() < wanted / Decimal::TWO;
            slice.taking |= top_up;
            (held, top_up)
        };
        if top_up {
            let leases = Arc::clone(self);
            let least = worst * Decimal::from(LEAST_REQUESTS);
            tokio::spawn(async move { leases.top_up(tenant, least, wanted).await });
        }
        held
    }

    async fn top_up(&self, tenant: Uuid, least: Decimal, wanted: Decimal) {
        let taken = leases::take(&self.db, tenant, self.replica, (SHARE_OF_AVAILABLE, least, wanted)).await;
        let mut slices = self.lock();
        let Some(slice) = slices.get_mut(&tenant) else { return };
        slice.taking = false;
        match taken {
            Ok(amount) => slice.granted += amount,
            Err(e) => tracing::warn!(error = %e, "credit lease not topped up; requests hold exactly meanwhile"),
        }
    }

    /// A request held against the slice was recorded: its worst case is free again, and what its record
    /// took from the lease (`from_lease`) is gone from it.
    pub fn settled(&self, tenant: Uuid, worst: Decimal, from_lease: Decimal) {
        if let Some(slice) = self.lock().get_mut(&tenant) {
            slice.in_flight -= worst;
            slice.granted -= from_lease;
        }
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
        self.lock().clear();
        let mut tx = self.db.begin().await?;
        leases::give_back_all(&mut tx, &[self.replica]).await?;
        tx.commit().await
    }
}
