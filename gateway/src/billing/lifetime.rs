//! How long a request's credit hold lives: as long as the request, up to the longest a request may run.
//!
//! An exact hold (a `credit_holds` row) that is not renewed is released after `--hold-expiry-s`: the
//! backstop for requests whose gateway died without settling. A request still running renews its hold
//! every quarter of that time, so a stream read slowly for hours keeps its credit set aside and can never
//! see it spent again by another request. (A hold against this replica's lease needs no renewal: a lease
//! goes only when its replica stops or dies.)
//!
//! No request runs for ever: past `--max-request-s` it is ended, billed for the work done, and its hold
//! released (`inference::stream`, `inference::worker`).

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::task::AbortOnDropHandle;

use super::leases::Held;
use super::Ledger;

/// The settings that bound a request's life and its hold's.
#[derive(Debug, Clone)]
pub struct Lifetime {
    pub db: sqlx::PgPool,
    /// How often a running request renews its exact hold.
    pub renew_every: Duration,
    /// The longest a request may run.
    pub max_request: Duration,
}

impl Lifetime {
    /// From the hold expiry: renewed four times within it, so a renewal lost to a slow database is not
    /// the end of a hold.
    #[must_use]
    pub fn new(db: sqlx::PgPool, hold_expiry: Duration, max_request: Duration) -> Self {
        Self { db, renew_every: (hold_expiry / 4).max(Duration::from_millis(100)), max_request }
    }
}

/// Renews a request's hold until dropped.
#[derive(Debug)]
pub struct Renewal(#[expect(dead_code, reason = "held for its drop, which stops the renewals")] Option<AbortOnDropHandle<()>>);

impl Ledger {
    /// Keeps the request's exact hold alive until the returned guard is dropped (nothing to do for a
    /// hold against a lease).
    #[must_use]
    pub fn keep_hold(&self) -> Renewal {
        if self.held != Held::Exact {
            return Renewal(None);
        }
        let (lifetime, request_id) = (self.lifetime.clone(), self.request_id.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(lifetime.renew_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // The first tick is now: the hold was just taken.
            tick.tick().await;
            loop {
                tick.tick().await;
                match crate::db::credits::renew_hold(&lifetime.db, &request_id).await {
                    Ok(true) => {}
                    // Settled meanwhile, or released: nothing left to keep.
                    Ok(false) => return,
                    Err(e) => tracing::warn!(%request_id, error = %e, "credit hold not renewed; trying again"),
                }
            }
        });
        Renewal(Some(AbortOnDropHandle::new(task)))
    }

    /// When the request must end: its arrival plus the longest a request may run.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        Instant::from_std(self.started) + self.lifetime.max_request
    }
}
