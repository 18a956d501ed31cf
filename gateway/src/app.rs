//! Building and serving the gateway. `build` binds first so tests can run it on port 0.

use tokio::net::TcpListener;

use crate::config::Settings;
use crate::routes;
use crate::state::AppState;

#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    state: AppState,
}

impl Application {
    /// # Errors
    /// When Postgres is unreachable, the address cannot be bound, or the settings contradict each other.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let limits = &settings.limits;
        anyhow::ensure!(
            limits.max_request_s < limits.hold_expiry_s,
            "--max-request-s ({}) must be shorter than --hold-expiry-s ({}): a request must never outlive its credit hold",
            limits.max_request_s,
            limits.hold_expiry_s
        );
        let listener = TcpListener::bind(settings.listen).await?;
        let metrics_listener = match settings.metrics_listen {
            Some(addr) => Some(TcpListener::bind(addr).await?),
            None => None,
        };
        let state = AppState::new(settings).await?;
        // Registered before it serves: every hold names a replica the others can see alive.
        crate::db::replicas::heartbeat(&state.db, state.replica_id).await?;
        count_replicas(&state.db, &state.settings.limits, (&state.limiter, &state.concurrency)).await;
        // Know the catalog and the workers before the first request.
        state.catalog.reload(&state.db).await?;
        state.registry.probe().await;
        state.registry.refresh().await;
        Ok(Self { listener, metrics_listener, state })
    }

    /// # Errors
    /// When the listener has no local address.
    pub fn port(&self) -> std::io::Result<u16> {
        self.listener.local_addr().map(|a| a.port())
    }

    /// The private metrics listener's port, when one is configured.
    #[must_use]
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_listener.as_ref().and_then(|l| l.local_addr().ok()).map(|a| a.port())
    }

    /// # Errors
    /// When the server fails.
    pub async fn run(self) -> anyhow::Result<()> {
        let registry = std::sync::Arc::clone(&self.state.registry);
        let every = std::time::Duration::from_millis(self.state.settings.probe_ms);
        tokio::spawn(async move { registry.probe_forever(every).await });
        let registry = std::sync::Arc::clone(&self.state.registry);
        let every = std::time::Duration::from_millis(self.state.settings.workers.registry_refresh_ms);
        tokio::spawn(async move { registry.refresh_forever(every).await });
        tokio::spawn(self.state.secrets.clone().reload_forever(std::time::Duration::from_secs(5)));
        let limiter = std::sync::Arc::clone(&self.state.limiter);
        tokio::spawn(async move { limiter.flush_forever().await });
        tokio::spawn(housekeeping(self.state.clone()));
        tokio::spawn(crate::batches::runner::run_forever(self.state.clone()));
        tokio::spawn(crate::changes::listen(
            self.state.settings.db.database_url.expose().to_owned(),
            self.state.db.clone(),
            std::sync::Arc::clone(&self.state.catalog),
            std::sync::Arc::clone(&self.state.keys),
            std::sync::Arc::clone(&self.state.revoked_tokens),
        ));
        let (db, replica_id) = (self.state.db.clone(), self.state.replica_id);
        let (stop_heartbeat, stopped) = tokio::sync::oneshot::channel();
        let heartbeat = tokio::spawn(replica_heartbeat(
            db.clone(),
            (
                replica_id,
                std::sync::Arc::clone(&self.state.leases),
                std::sync::Arc::clone(&self.state.limiter),
                std::sync::Arc::clone(&self.state.concurrency),
            ),
            self.state.settings.limits.clone(),
            stopped,
        ));
        let header_read_timeout = std::time::Duration::from_millis(self.state.settings.header_read_timeout_ms);
        if let Some(listener) = self.metrics_listener {
            let private = routes::private_router(self.state.clone());
            tokio::spawn(crate::serve::serve(listener, private, header_read_timeout, std::future::pending()));
        }
        let (tasks, leases, limiter) =
            (self.state.tasks.clone(), std::sync::Arc::clone(&self.state.leases), std::sync::Arc::clone(&self.state.limiter));
        // Routes other modules own, under the public listener's layers: the OpenAPI document, the console.
        let service = crate::openapi::router().merge(crate::console::router(&self.state));
        crate::serve::serve(self.listener, routes::router(self.state, service), header_read_timeout, runaii_wire::shutdown::signal()).await;
        // The HTTP exchanges have ended; work that outlived them (a client that left a stream or a whole
        // answer, an idempotent answer being stored) still records what it cost.
        tasks.close();
        drain(&tasks).await;
        // The tokens of the last requests still count against their keys on the other replicas.
        limiter.flush().await;
        if let Err(e) = leases.give_back_all().await {
            tracing::warn!(error = %e, "credit leases not given back; the other replicas release them when this one is gone");
        }
        // The requests have ended and settled their holds: stop saying this replica is alive, then leave,
        // so the others do not wait for its row to go stale.
        let _ = stop_heartbeat.send(());
        let _ = heartbeat.await;
        if let Err(e) = crate::db::replicas::remove(&db, replica_id).await {
            tracing::warn!(error = %e, "replica row not removed; the others will forget it when it goes stale");
        }
        Ok(())
    }
}

/// Waits for the tracked tasks, saying how many are left every few seconds. The orchestrator's kill
/// bounds the wait; the holds of work cut that way are released by the other replicas.
async fn drain(tasks: &tokio_util::task::TaskTracker) {
    while tokio::time::timeout(std::time::Duration::from_secs(5), tasks.wait()).await.is_err() {
        tracing::info!(left = tasks.len(), "shutting down: waiting for requests to record their cost");
    }
}

/// Every minute: give back this replica's credit leases idle for a minute, release credit holds older
/// than `--hold-expiry-s` (a backstop: holds of dead replicas go within `--replica-timeout-ms`, see
/// [`replica_heartbeat`]), forget idempotency keys past their lifetime, and delete stored responses and
/// files past their expiry. Every replica runs it; the statements are safe to run concurrently.
async fn housekeeping(state: AppState) {
    let (db, limits) = (&state.db, &state.settings.limits);
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(60));
    loop {
        tick.tick().await;
        state.leases.give_back_idle(std::time::Duration::from_secs(60)).await;
        match crate::db::credits::release_stale_holds(db, i64::from(limits.hold_expiry_s)).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(tenants = n, "released stale credit holds"),
            Err(e) => tracing::warn!(error = %e, "stale holds not released"),
        }
        if let Err(e) = crate::db::idempotency::expire(db, i64::from(limits.idempotency_ttl_hours) * 3600).await {
            tracing::warn!(error = %e, "expired idempotency keys not deleted");
        }
        if let Err(e) = crate::db::responses::expire(db).await {
            tracing::warn!(error = %e, "expired stored responses not deleted");
        }
        if let Err(e) = crate::files::expire(&state).await {
            tracing::warn!(error = ?e, "expired files not deleted");
        }
        if let Err(e) = crate::db::admin_tokens::expire(db).await {
            tracing::warn!(error = %e, "staff token revocations past their tokens' lifetime not deleted");
        }
    }
}

/// Every `--replica-heartbeat-ms`: refresh this replica's row, and release the credit holds of replicas
/// silent for `--replica-timeout-ms` (a killed gateway's requests will never settle), and count the live
/// ones for the limiter. Every replica runs it; the statement is safe to run concurrently. Ends when `stop`
/// fires (graceful shutdown).
///
/// A row found gone means the others presumed this replica dead and released its leases: its slices are
/// forgotten, so nothing more is held against credit it no longer has.
async fn replica_heartbeat(
    db: sqlx::PgPool,
    (replica, leases, limiter, concurrency): (
        uuid::Uuid,
        std::sync::Arc<crate::billing::leases::Leases>,
        std::sync::Arc<crate::ratelimit::Limiter>,
        std::sync::Arc<crate::concurrency::Concurrency>,
    ),
    limits: crate::config::LimitArgs,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(limits.replica_heartbeat_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let timeout_ms = i64::try_from(limits.replica_timeout_ms).unwrap_or(i64::MAX);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tick.tick() => {}
        }
        match crate::db::replicas::heartbeat(&db, replica).await {
            Ok(false) => {}
            Ok(true) => {
                tracing::warn!("this replica was presumed dead and its credit leases released; forgetting them");
                if let Err(e) = leases.forget().await {
                    tracing::warn!(error = %e, "credit leases not given back after a presumed death");
                }
            }
            Err(e) => tracing::warn!(error = %e, "replica heartbeat not written"),
        }
        match crate::db::replicas::release_orphaned_holds(&db, timeout_ms).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(tenants = n, "released the credit holds of gateway replicas that died"),
            Err(e) => tracing::warn!(error = %e, "holds of dead replicas not released"),
        }
        count_replicas(&db, &limits, (&limiter, &concurrency)).await;
    }
}

/// Tells the limiter and the caps in flight how many replicas are alive, so that without Redis each
/// enforces its share of each limit. When Postgres cannot say, the last count stands.
async fn count_replicas(
    db: &sqlx::PgPool,
    limits: &crate::config::LimitArgs,
    (limiter, concurrency): (&crate::ratelimit::Limiter, &crate::concurrency::Concurrency),
) {
    let timeout_ms = i64::try_from(limits.replica_timeout_ms).unwrap_or(i64::MAX);
    match crate::db::replicas::live(db, timeout_ms).await {
        Ok(n) => {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            limiter.set_replicas(n);
            concurrency.set_replicas(n);
        }
        Err(e) => tracing::warn!(error = %e, "live replicas not counted; the last count stands"),
    }
}
