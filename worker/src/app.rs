//! Building and serving the worker: bind first (so tests can use port 0), then load the model in the
//! background while `/health` answers 503.

use std::sync::{Arc, OnceLock};

use tokio::net::TcpListener;

use crate::config::Settings;
use crate::engine::{self, Loaded};
use crate::http::{self, AppState, HttpMetrics};
use crate::model_file;
use crate::template::ChatTemplate;

/// How often the worker secret file is re-read (rotation without restarts).
const SECRET_RELOAD: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug)]
pub struct Application {
    listener: TcpListener,
    state: AppState,
    loading: tokio::sync::oneshot::Receiver<anyhow::Result<Arc<Loaded>>>,
}

impl Application {
    /// Checks the model file, binds the listener and starts loading the model.
    ///
    /// # Errors
    /// A missing or corrupt model file, or an address that cannot be bound.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        // Before llama.cpp loads anything: a CPU without the kernels' instructions would die with SIGILL.
        crate::cpu::check()?;
        tracing::info!(cpu = %crate::cpu::describe(), "llama.cpp kernels built for");
        model_file::verify(&settings.model_path)?;
        let secrets = settings.worker_secrets()?;
        let listener = TcpListener::bind(settings.listen).await?;
        let loading = engine::load(settings.load_settings());
        let state = AppState {
            settings: Arc::new(settings),
            loaded: Arc::new(OnceLock::new()),
            template: Arc::new(OnceLock::new()),
            metrics: Arc::new(HttpMetrics::default()),
            secrets,
            replays: Arc::default(),
            receipts: Arc::default(),
        };
        Ok(Self { listener, state, loading })
    }

    /// # Errors
    /// When the listener has no local address.
    pub fn port(&self) -> std::io::Result<u16> {
        self.listener.local_addr().map(|a| a.port())
    }

    /// Serves until the process ends. A model that fails to load ends the process with the reason.
    ///
    /// # Errors
    /// When the model cannot load or the server fails.
    pub async fn run(self) -> anyhow::Result<()> {
        let Self { listener, state, loading } = self;
        tokio::spawn(state.secrets.clone().reload_forever(SECRET_RELOAD));
        if let Some(redis_url) = state.settings.announce_redis_url.clone() {
            let advertise = state.settings.advertise_url.clone().unwrap_or_else(|| format!("http://{}", state.settings.listen));
            let announcer = crate::announce::Announcer {
                redis_url,
                advertise_url: advertise,
                model_id: state.settings.model_id.clone(),
                secrets: state.secrets.clone(),
                loaded: Arc::clone(&state.loaded),
            };
            tokio::spawn(announcer.run());
        }
        let loaded_slot = Arc::clone(&state.loaded);
        let template_slot = Arc::clone(&state.template);
        let template_file = state.settings.chat_template_file.clone();
        let model_id = state.settings.model_id.clone();
        let load = async move {
            let loaded = loading.await.map_err(|_| anyhow::anyhow!("the engine thread ended while loading"))??;
            // Set before the engine: a handler that finds the engine ready finds the template.
            let _ = template_slot.set(ChatTemplate::load(&loaded.model, template_file.as_deref())?);
            tracing::info!(model = %model_id, slots = loaded.settings.slots, threads = loaded.settings.threads, "model ready");
            let _ = loaded_slot.set(loaded);
            // The server keeps running after the model is up.
            std::future::pending::<anyhow::Result<()>>().await
        };
        let serve = async move {
            // Each streamed token is a small write: without TCP_NODELAY it waits on the client's delayed ACK.
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, http::router(state))
                .with_graceful_shutdown(runaii_wire::shutdown::signal())
                .await
                .map_err(anyhow::Error::from)
        };
        tokio::select! {
            r = load => r,
            r = serve => r,
        }
    }
}
