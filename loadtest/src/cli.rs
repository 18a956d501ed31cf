//! The `loadtest` command line.

use std::time::Duration;

use clap::{ArgGroup, Parser};

use crate::mix::Mix;

#[derive(Debug, Parser)]
#[command(
    name = "loadtest",
    about = "Load an OpenAI-compatible endpoint with a mix of chat requests, then reconcile what clients were told with the ledger",
    group(ArgGroup::new("mode").required(true).args(["rate", "concurrency"])),
    group(ArgGroup::new("stop").required(true).multiple(true).args(["duration", "requests"]))
)]
pub struct Args {
    /// The gateway (or a worker, or the mock worker), e.g. http://127.0.0.1:8080.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub base_url: String,
    /// The API key, sent as `Authorization: Bearer`.
    #[arg(long, env = "RUNAII_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// A file holding the API key (such as .data/demo-api-key).
    #[arg(long, conflicts_with = "api_key")]
    pub api_key_file: Option<std::path::PathBuf>,
    #[arg(long, default_value = "smollm2-135m-instruct")]
    pub model: String,
    /// Open loop: requests per second, sent on the clock whatever the answers do.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Closed loop: clients, each sending its next request when its last one ended.
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// How long to send (`30s`, `500ms`, `2m`; a bare number is seconds).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// How many requests to send (with --duration: whichever comes first).
    #[arg(long)]
    pub requests: Option<u64>,
    /// Kinds and weights: plain, json_schema, stream, abandon.
    #[arg(long, default_value = "plain=4,json_schema=3,stream=2,abandon=1")]
    pub mix: Mix,
    #[arg(long, default_value_t = 16)]
    pub max_tokens: u32,
    /// Longest a request may take, answer included.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Open loop: requests due while this many are in flight are skipped (and counted).
    #[arg(long, default_value_t = 20_000)]
    pub max_in_flight: usize,
    /// Print the summary (and reconciliation) as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Read the ledger from this Postgres to reconcile (on by default when given).
    #[arg(long)]
    pub database_url: Option<String>,
    /// An admin JWT with the `finance` role: read the ledger through the admin API when no database is
    /// given (on by default when given).
    #[arg(long, env = "RUNAII_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Reconcile even without a source named (fails), or with one.
    #[arg(long, conflicts_with = "no_reconcile")]
    pub reconcile: bool,
    /// A gateway replica is killed during the run (`scripts/loadtest-replicas.sh`): a stream cut with no
    /// record is noted, not a discrepancy; every completed answer must still be recorded exactly.
    #[arg(long)]
    pub replica_loss: bool,
    /// Skip reconciliation even when a source is given.
    #[arg(long)]
    pub no_reconcile: bool,
    /// How long to wait, before and after the run, for the tenant's in-flight requests to settle.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub settle_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a duration (such as 30s, 500ms, 2m, 1h)")]
pub struct NotADuration(String);

/// `30s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
///
/// # Errors
/// Anything else.
pub fn parse_duration(text: &str) -> Result<Duration, NotADuration> {
    let bad = || NotADuration(text.to_owned());
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number.parse().map_err(|_| bad())?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3 days").is_err());
    }

    #[test]
    fn a_mode_and_a_stop_are_required() {
        use clap::CommandFactory;
        Args::command().debug_assert();
        assert!(Args::try_parse_from(["loadtest", "--rate", "5"]).is_err());
        assert!(Args::try_parse_from(["loadtest", "--duration", "5s"]).is_err());
        assert!(Args::try_parse_from(["loadtest", "--rate", "5", "--concurrency", "2", "--requests", "1"]).is_err());
        let ok = Args::try_parse_from(["loadtest", "--concurrency", "2", "--requests", "10", "--mix", "stream=1"]).unwrap();
        assert_eq!(ok.mix.to_string(), "stream=1");
    }
}
