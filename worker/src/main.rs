//! `runaii-worker`: parse settings, set up logging, build, serve.

use clap::Parser;
use runaii_worker::{Application, Settings};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs go to stderr (stdout carries command output, such as a new key), in colour only on a terminal.
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,llama-cpp-2=warn")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
    let settings = Settings::parse();
    if settings.exit_on_stdin_eof {
        exit_when_stdin_closes();
    }
    let app = Application::build(settings).await?;
    tracing::info!(port = app.port()?, "listening");
    app.run().await
}

/// Ties the worker's life to its parent's: when the parent's end of our stdin closes, we exit.
fn exit_when_stdin_closes() {
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        std::process::exit(0);
    });
}
