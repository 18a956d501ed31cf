//! Gateway settings, from flags or `RUNAII_*` environment variables.

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "runaii-gateway", about = "Authenticated OpenAI-compatible gateway in front of runaii workers")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API.
    Serve(Settings),
    /// Apply the database migrations (run once per deploy, not by every replica).
    Migrate(DbArgs),
    /// Create a tenant (if missing) and a new API key for it; prints the key once.
    CreateKey {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value = "")]
        name: String,
    },
    /// Add or update a catalog model and the worker URL that serves it.
    UpsertModel {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        id: String,
        #[arg(long)]
        context_length: i32,
        /// USD per million input tokens, as a decimal.
        #[arg(long)]
        input_price: rust_decimal::Decimal,
        /// USD per million output tokens, as a decimal.
        #[arg(long)]
        output_price: rust_decimal::Decimal,
        #[arg(long)]
        worker_url: Option<String>,
    },
}

#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    #[arg(long, env = "DATABASE_URL", default_value = "postgres://postgres@127.0.0.1:5432/runaii")]
    pub database_url: String,
    /// Connections this process may hold; replicas × this must stay under Postgres' max_connections.
    #[arg(long, env = "RUNAII_DB_MAX_CONNECTIONS", default_value_t = 16)]
    pub db_max_connections: u32,
}

#[derive(Debug, Clone, Args)]
pub struct Settings {
    #[command(flatten)]
    pub db: DbArgs,
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    pub redis_url: String,
    #[arg(long, env = "RUNAII_GATEWAY_ADDR", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "RUNAII_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// How long a key lookup is trusted before the database is asked again: a revoked key stops working
    /// within this many milliseconds on every replica.
    #[arg(long, env = "RUNAII_KEY_CACHE_MS", default_value_t = 2000)]
    pub key_cache_ms: u64,
    /// How often statically configured workers are probed for health, in milliseconds.
    #[arg(long, env = "RUNAII_PROBE_MS", default_value_t = 1000)]
    pub probe_ms: u64,
}
