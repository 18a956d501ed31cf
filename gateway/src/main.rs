//! `runaii-gateway`: subcommands `serve`, `migrate`, `openapi`, `create-key`, `upsert-model`, `grant-credits`,
//! `set-tenant-caps`, `issue-admin-token`, `worker-token`, `init-worker-secret`.

use clap::Parser;
use runaii_gateway::config::{Cli, Command};
use runaii_gateway::ops::{self, Actor};
use runaii_gateway::{admin, db, Application};

/// A request allocates and frees many small buffers (headers, JSON trees, strings); glibc's malloc spent
/// 14% of the gateway's CPU on them under load, mimalloc about half as much.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
            let tenant = ops::tenants::ensure(&pool, Actor::CLI, &tenant).await?;
            let created = ops::keys::create(&pool, Actor::CLI, tenant, &ops::keys::KeySpec { name, ..Default::default() }).await?;
            // The only time the secret is shown.
            println!("{}", created.key);
            Ok(())
        }
        Command::GrantCredits { db: args, tenant: name, amount, note } => {
            let pool = db::connect(&args).await?;
            let tenant = ops::tenants::ensure(&pool, Actor::CLI, &name).await?;
            let granted = ops::credits::grant(&pool, Actor::CLI, tenant, amount, &note).await?;
            println!("tenant {name}: balance {}", granted.balance.0);
            Ok(())
        }
        Command::SetTenantCaps { db: args, tenant: name, rpm_limit, tpm_limit, monthly_spend_cap, max_concurrent_requests } => {
            let pool = db::connect(&args).await?;
            let tenant = db::tenants::find(&pool, &name).await?.ok_or_else(|| anyhow::anyhow!("no tenant is called {name}"))?;
            let caps = ops::tenants::CapsUpdate {
                rpm_limit: rpm_limit.map(|c| c.0),
                tpm_limit: tpm_limit.map(|c| c.0),
                monthly_spend_cap: monthly_spend_cap.map(|c| c.0),
                max_concurrent_requests,
            };
            let set = ops::tenants::set_caps(&pool, Actor::CLI, tenant, &caps).await?;
            let show = |v: Option<String>| v.unwrap_or_else(|| "none".into());
            println!(
                "tenant {name}: rpm_limit {}, tpm_limit {}, monthly_spend_cap {}, max_concurrent_requests {}",
                show(set.rpm_limit.map(|n| n.to_string())),
                show(set.tpm_limit.map(|n| n.to_string())),
                show(set.monthly_spend_cap.map(|d| d.0)),
                set.max_concurrent_requests
            );
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
        Command::IssueAdminToken { admin_jwt_secret, issuer, audience, subject, roles, tenant_id, ttl_hours } => {
            let claims = admin::Claims::new(subject, roles, tenant_id, ttl_hours * 3600);
            println!("{}", runaii_gateway::auth::staff::issue_as(admin_jwt_secret.expose(), &claims, &issuer, &audience)?);
            Ok(())
        }
        Command::RevokeAdminToken { db: args, jti, max_lifetime_hours } => {
            let pool = db::connect(&args).await?;
            let revocation = ops::admin_tokens::revoke(&pool, Actor::CLI, &jti, u64::from(max_lifetime_hours) * 3600).await?;
            println!("token {} revoked at {}", revocation.jti, revocation.revoked_at);
            Ok(())
        }
        Command::UpsertModel {
            db: args,
            id,
            context_length,
            input_price,
            output_price,
            cached_input_price,
            worker_url,
            supports_tools,
        } => {
            let pool = db::connect(&args).await?;
            let change = db::models::ModelChange {
                context_length: Some(context_length),
                input_price_per_mtok: Some(input_price),
                cached_input_price_per_mtok: cached_input_price,
                output_price_per_mtok: Some(output_price),
                supports_tools,
                ..Default::default()
            };
            ops::catalog::upsert(&pool, Actor::CLI, &id, change, worker_url.as_deref()).await?;
            println!("model {id} saved");
            Ok(())
        }
    }
}
