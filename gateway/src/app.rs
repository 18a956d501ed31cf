//! Building and serving the gateway. `build` binds first so tests can run it on port 0.

use tokio::net::TcpListener;

use crate::config::Settings;
use crate::routes;
use crate::state::AppState;

#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    state: AppState,
}

impl Application {
    /// # Errors
    /// When Postgres is unreachable or the address cannot be bound.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(settings.listen).await?;
        let state = AppState::new(settings).await?;
        // Know the configured workers' health before the first request.
        state.registry.probe().await;
        Ok(Self { listener, state })
    }

    /// # Errors
    /// When the listener has no local address.
    pub fn port(&self) -> std::io::Result<u16> {
        self.listener.local_addr().map(|a| a.port())
    }

    /// # Errors
    /// When the server fails.
    pub async fn run(self) -> anyhow::Result<()> {
        let registry = std::sync::Arc::clone(&self.state.registry);
        let every = std::time::Duration::from_millis(self.state.settings.probe_ms);
        tokio::spawn(async move { registry.probe_forever(every).await });
        axum::serve(self.listener, routes::router(self.state)).await?;
        Ok(())
    }
}
