//! `mock-worker`: answers like a runaii worker, instantly, for gateway overhead benchmarks only.

use axum::serve::ListenerExt;
use clap::Parser;
use runaii_loadtest::mock::{self, MockSettings, MockState};

#[derive(Debug, Parser)]
#[command(
    name = "mock-worker",
    about = "A stand-in runaii worker with a fixed instant completion, for gateway overhead benchmarks (not for tests of the worker)"
)]
struct Cli {
    #[command(flatten)]
    settings: MockSettings,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Cli::parse().settings;
    let listener = tokio::net::TcpListener::bind(settings.listen).await?;
    eprintln!("mock-worker: model {} on http://{}", settings.model, listener.local_addr()?);
    let nodelay = settings.tcp_nodelay;
    let app = mock::router(MockState::new(settings));
    if nodelay {
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                eprintln!("mock-worker: TCP_NODELAY not set: {e}");
            }
        });
        axum::serve(listener, app).await?;
    } else {
        axum::serve(listener, app).await?;
    }
    Ok(())
}
