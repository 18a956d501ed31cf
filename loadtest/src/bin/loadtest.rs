//! `loadtest`: send the load, print the summary, reconcile with the ledger. Exits 1 when reconciliation
//! finds a discrepancy.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Parser;
use runaii_loadtest::account;
use runaii_loadtest::body::BodySpec;
use runaii_loadtest::cli::Args;
use runaii_loadtest::drive::{self, Mode, Plan};
use runaii_loadtest::reconcile::admin_api::AdminSource;
use runaii_loadtest::reconcile::postgres::PgSource;
use runaii_loadtest::reconcile::{self, Expect, Source};
use runaii_loadtest::send::Target;
use runaii_loadtest::summary::Summary;

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let api_key = match &args.api_key_file {
        Some(path) => Some(std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?.trim().to_owned()),
        None => args.api_key.clone(),
    };
    let target = Arc::new(Target::new(&args.base_url, api_key, args.timeout)?);
    let source = ledger_source(&args, &target).await?;

    // Before the first request: the tenant, the prices, and the balance once nothing is in flight.
    let before = match &source {
        Some(source) => {
            let tenant = account::tenant(&target).await.context("reading the key's tenant (GET /v1/account)")?;
            let prices = account::prices(&target, &args.model).await.context("reading the model's prices")?;
            let (start, balance) = source.settled(tenant, args.settle_timeout).await?;
            if !balance.reserved.is_zero() {
                eprintln!("warning: {} is reserved by requests of this tenant still in flight; reconciliation may fail", balance.reserved);
            }
            Some((tenant, prices, start, balance))
        }
        None => None,
    };

    let mode = match (args.rate, args.concurrency) {
        (Some(rate), _) if rate > 0.0 => Mode::Open { rate },
        (None, Some(concurrency)) if concurrency > 0 => Mode::Closed { concurrency },
        _ => bail!("--rate and --concurrency must be above 0"),
    };
    let plan = Plan { mode, requests: args.requests, duration: args.duration, max_in_flight: args.max_in_flight };
    let mode_text = match mode {
        Mode::Open { rate } => format!("open loop {rate} req/s"),
        Mode::Closed { concurrency } => format!("closed loop ×{concurrency}"),
    };
    if !args.json {
        eprintln!("loadtest: {mode_text} against {} …", args.base_url);
    }
    let spec = BodySpec { model: args.model.clone(), max_tokens: args.max_tokens };
    let run = drive::run(Arc::clone(&target), spec, &args.mix, plan).await;
    let summary = Summary::of(&run, &args.base_url, mode_text, args.mix.to_string());
    if !args.json {
        print!("{}", summary.render());
    }

    let report = match (&source, before) {
        (Some(source), Some((tenant, prices, start, balance_before))) => {
            let (_, balance_after) = source.settled(tenant, args.settle_timeout).await?;
            let ids: Vec<String> = run.observations.iter().filter_map(|o| o.request_id.clone()).collect();
            let ledger = source.ledger(tenant, start, balance_before, balance_after, &ids).await?;
            let expect = Expect { model: args.model.clone(), prices, max_tokens: args.max_tokens, replica_loss: args.replica_loss };
            Some(reconcile::check(&run.observations, &ledger, &expect))
        }
        _ => None,
    };
    if args.json {
        println!("{}", serde_json::json!({"summary": summary, "reconciliation": report}));
    } else if let Some(report) = &report {
        print!("{}", report.render());
    }
    Ok(if report.as_ref().is_some_and(|r| !r.passed()) { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Postgres when a URL is given, else the admin API when a token is; none with `--no-reconcile`.
async fn ledger_source(args: &Args, target: &Target) -> anyhow::Result<Option<Source>> {
    if args.no_reconcile {
        return Ok(None);
    }
    if let Some(url) = &args.database_url {
        let pg = PgSource::connect(url).await.context("connecting to --database-url")?;
        return Ok(Some(Source::Postgres(pg)));
    }
    if let Some(token) = &args.admin_token {
        return Ok(Some(Source::AdminApi(AdminSource::new(target.http.clone(), &args.base_url, token.clone()))));
    }
    if args.reconcile {
        bail!("--reconcile needs --database-url or --admin-token to read the ledger");
    }
    Ok(None)
}
