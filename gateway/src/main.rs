//! `runaii-gateway`: subcommands `serve`, `migrate`, `create-key`, `upsert-model`.

use clap::Parser;
use runaii_gateway::config::{Cli, Command};
use runaii_gateway::{auth, db, Application};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs go to stderr (stdout carries command output, such as a new key), in colour only on a terminal.
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match Cli::parse().command {
        Command::Serve(settings) => {
            let app = Application::build(settings).await?;
            tracing::info!(port = app.port()?, "listening");
            app.run().await
        }
        Command::Migrate(args) => {
            let pool = db::connect(&args).await?;
            db::MIGRATOR.run(&pool).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::CreateKey { db: args, tenant, name } => {
            let pool = db::connect(&args).await?;
            let tenant_id = db::tenants::ensure(&pool, &tenant).await?;
            let (key, public_id, hash) = auth::generate();
            db::keys::insert(&pool, tenant_id, &public_id, &hash, &name, None).await?;
            // The only time the secret is shown.
            println!("{key}");
            Ok(())
        }
        Command::UpsertModel { db: args, id, context_length, input_price, output_price, worker_url } => {
            let pool = db::connect(&args).await?;
            db::models::upsert(&pool, &id, context_length, input_price, output_price, worker_url.as_deref()).await?;
            println!("model {id} saved");
            Ok(())
        }
    }
}
