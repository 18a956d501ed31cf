//! `runaii-worker`: parse settings, set up logging, build, serve.

use clap::Parser;
use runaii_worker::{Application, Settings};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Held to the end of main: dropping it flushes the last spans.
    let _telemetry = runaii_telemetry::init("runaii-worker", "info,llama-cpp-2=warn")?;
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
