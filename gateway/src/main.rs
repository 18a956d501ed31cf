//! `runaii-gateway`: subcommands `serve`, `migrate`, `openapi`, `create-key`, `upsert-model`, `grant-credits`,
//! `issue-admin-token`, `worker-token`, `init-worker-secret`.

use clap::Parser;
use runaii_gateway::config::{Cli, Command};
use runaii_gateway::{admin, auth, db, Application};

/// The audit log's actor for changes made from the command line (by whoever runs it on the host).
const CLI_ACTOR: &str = "cli";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Held to the end of main: dropping it flushes the last spans.
    let _telemetry = runaii_telemetry::init("runaii-gateway", "info")?;
    match Cli::parse().command {
        Command::Serve(settings) => {
            let app = Application::build(settings).await?;
            tracing::info!(port = app.port()?, "listening");
            app.run().await
        }
        Command::Openapi => {
            print!("{}", runaii_gateway::openapi::to_json());
            Ok(())
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
            let mut tx = pool.begin().await?;
            let info =
                db::keys::insert(&mut tx, tenant_id, &public_id, &hash, &db::keys::NewKey { name: &name, ..Default::default() }).await?;
            let after = serde_json::to_value(&info).ok();
            let entry = db::audit::Change {
                actor: CLI_ACTOR,
                action: "key.create",
                target_type: "api_key",
                target_id: info.id.to_string(),
                before: None,
                after,
            };
            db::audit::append(&mut tx, entry).await?;
            tx.commit().await?;
            // The only time the secret is shown.
            println!("{key}");
            Ok(())
        }
        Command::GrantCredits { db: args, tenant, amount, note } => {
            let pool = db::connect(&args).await?;
            let tenant_id = db::tenants::ensure(&pool, &tenant).await?;
            let mut tx = pool.begin().await?;
            let (entry, after) = db::credits::grant(&mut tx, tenant_id, amount, CLI_ACTOR, &note)
                .await?
                .ok_or_else(|| anyhow::anyhow!("tenant vanished"))?;
            let after_json = serde_json::json!({"balance": after.balance.normalize().to_string(), "grant": {"ledger_entry": entry, "amount": amount.normalize().to_string(), "note": note}});
            let change = db::audit::Change {
                actor: CLI_ACTOR,
                action: "credits.grant",
                target_type: "tenant",
                target_id: tenant_id.to_string(),
                before: None,
                after: Some(after_json),
            };
            db::audit::append(&mut tx, change).await?;
            tx.commit().await?;
            println!("tenant {tenant}: balance {}", after.balance.normalize());
            Ok(())
        }
        Command::InitWorkerSecret { file, owner_uid } => {
            let made = runaii_gateway::worker_secret::init(&file, owner_uid)?;
            println!("{} {}", if made { "wrote a new worker secret to" } else { "kept the worker secret in" }, file.display());
            Ok(())
        }
        Command::WorkerToken(args) => {
            println!("{}", args.secrets()?.bearer_token());
            Ok(())
        }
        Command::IssueAdminToken { admin_jwt_secret, subject, roles, tenant_id, ttl_hours } => {
            let exp = chrono::Utc::now().timestamp().unsigned_abs() + ttl_hours * 3600;
            let claims = admin::Claims { sub: subject, exp, roles, tenant_id };
            println!("{}", admin::issue(&admin_jwt_secret, &claims)?);
            Ok(())
        }
        Command::UpsertModel { db: args, id, context_length, input_price, output_price, worker_url, supports_tools } => {
            let pool = db::connect(&args).await?;
            db::models::upsert(&pool, &id, context_length, input_price, output_price, worker_url.as_deref()).await?;
            if supports_tools.is_some() {
                let mut tx = pool.begin().await?;
                let change = db::models::ModelChange { supports_tools, ..Default::default() };
                db::models::write(&mut tx, &id, &change, false).await?;
                tx.commit().await?;
            }
            println!("model {id} saved");
            Ok(())
        }
    }
}
