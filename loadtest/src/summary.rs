//! The run's summary: latency percentiles, throughput, counts by outcome and status, as text or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::drive::Run;
use crate::mix::Kind;
use crate::observe::{Observation, Outcome};

/// Nearest-rank percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Exact percentiles (every sample is kept: a run's few hundred thousand durations sort in
/// milliseconds). `None` without samples.
#[must_use]
pub fn percentiles(samples: &mut [Duration]) -> Option<Percentiles> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let n = samples.len();
    // Nearest rank: the smallest sample with at least p% of the samples at or below it.
    let at = |p: usize| samples[(p * n).div_ceil(100).max(1) - 1];
    let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
    Some(Percentiles { count: n, p50_ms: ms(at(50)), p95_ms: ms(at(95)), p99_ms: ms(at(99)), max_ms: ms(samples[n - 1]) })
}

#[derive(Debug, Clone, Serialize)]
pub struct KindSummary {
    pub sent: u64,
    pub completed: u64,
    /// Of completed requests (abandoned ones: to the moment they were dropped).
    pub latency: Option<Percentiles>,
    /// Streams: to the first content chunk.
    pub first_token: Option<Percentiles>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub target: String,
    pub mode: String,
    pub mix: String,
    pub elapsed_s: f64,
    pub sent: u64,
    pub skipped: u64,
    pub completed: u64,
    pub completed_per_s: f64,
    pub answered_per_s: f64,
    pub output_tokens: u64,
    pub output_tokens_per_s: f64,
    pub outcomes: BTreeMap<&'static str, u64>,
    /// HTTP status of each answer; `none` when no answer came.
    pub status_codes: BTreeMap<String, u64>,
    /// Non-2xx answers by status and `error.code`.
    pub errors: BTreeMap<String, u64>,
    /// Answers that show a worker failing: its 502s and 503s, and streams it cut (see
    /// [`Observation::is_worker_failure`]).
    pub worker_failures: u64,
    /// Of completed requests.
    pub latency: Option<Percentiles>,
    pub by_kind: BTreeMap<&'static str, KindSummary>,
    /// Sum of `usage.cost` of completed answers, USD, exact.
    pub told_cost: Decimal,
    /// Why requests broke (the first few distinct reasons).
    pub broken_reasons: Vec<String>,
}

impl Summary {
    #[must_use]
    pub fn of(run: &Run, target: &str, mode: String, mix: String) -> Self {
        let obs = &run.observations;
        let secs = run.elapsed.as_secs_f64().max(1e-9);
        let count = |f: &dyn Fn(&Observation) -> bool| obs.iter().filter(|o| f(o)).count() as u64;
        let completed = count(&|o| matches!(o.outcome, Outcome::Completed { .. }));
        let answered = count(&|o| o.status.is_some());
        let output_tokens: u64 = obs.iter().map(|o| u64::from(o.completion_tokens())).sum();
        let mut outcomes = BTreeMap::new();
        let mut status_codes = BTreeMap::new();
        let mut errors = BTreeMap::new();
        let mut broken_reasons: Vec<String> = Vec::new();
        for o in obs {
            *outcomes.entry(o.outcome.label()).or_insert(0) += 1;
            *status_codes.entry(o.status.map_or_else(|| "none".to_owned(), |s| s.to_string())).or_insert(0) += 1;
            if let Some(status) = o.status.filter(|s| !(200..300).contains(s)) {
                *errors.entry(format!("{status} {}", o.error_code.as_deref().unwrap_or("-"))).or_insert(0) += 1;
            }
            if matches!(o.outcome, Outcome::StreamFailed { .. }) {
                *errors.entry(format!("stream error chunk {}", o.error_code.as_deref().unwrap_or("-"))).or_insert(0) += 1;
            }
            if let Outcome::Broken { why } = &o.outcome {
                if broken_reasons.len() < 5 && !broken_reasons.contains(why) {
                    broken_reasons.push(why.clone());
                }
            }
        }
        let worker_failures = count(&Observation::is_worker_failure);
        let finished = |o: &Observation| matches!(o.outcome, Outcome::Completed { .. } | Outcome::Abandoned);
        let mut all: Vec<Duration> = obs.iter().filter(|o| matches!(o.outcome, Outcome::Completed { .. })).map(|o| o.latency).collect();
        let by_kind = Kind::ALL
            .into_iter()
            .filter_map(|kind| {
                let of_kind: Vec<&Observation> = obs.iter().filter(|o| o.kind == kind).collect();
                if of_kind.is_empty() {
                    return None;
                }
                let mut latency: Vec<Duration> = of_kind.iter().filter(|o| finished(o)).map(|o| o.latency).collect();
                let mut first: Vec<Duration> = of_kind.iter().filter_map(|o| o.first_token).collect();
                let summary = KindSummary {
                    sent: of_kind.len() as u64,
                    completed: of_kind.iter().filter(|o| matches!(o.outcome, Outcome::Completed { .. })).count() as u64,
                    latency: percentiles(&mut latency),
                    first_token: percentiles(&mut first),
                };
                Some((kind.name(), summary))
            })
            .collect();
        Self {
            target: target.to_owned(),
            mode,
            mix,
            elapsed_s: (secs * 1000.0).round() / 1000.0,
            sent: obs.len() as u64,
            skipped: run.skipped,
            completed,
            completed_per_s: round2(completed as f64 / secs),
            answered_per_s: round2(answered as f64 / secs),
            output_tokens,
            output_tokens_per_s: round2(output_tokens as f64 / secs),
            outcomes,
            status_codes,
            errors,
            worker_failures,
            latency: percentiles(&mut all),
            by_kind,
            told_cost: obs.iter().filter_map(Observation::told_cost).sum::<Decimal>().normalize(),
            broken_reasons,
        }
    }

    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "target {}  {}  mix {}  {:.1} s", self.target, self.mode, self.mix, self.elapsed_s);
        let _ = writeln!(
            out,
            "sent {} (skipped {}), completed {} ({} req/s; answered {} req/s), output {} tokens ({} tok/s)",
            self.sent,
            self.skipped,
            self.completed,
            self.completed_per_s,
            self.answered_per_s,
            self.output_tokens,
            self.output_tokens_per_s
        );
        let _ = writeln!(out, "outcomes: {}", join(&self.outcomes));
        let _ = writeln!(out, "status:   {}", join(&self.status_codes));
        if !self.errors.is_empty() {
            let _ = writeln!(out, "errors:   {}", join(&self.errors));
        }
        if self.worker_failures > 0 {
            let _ = writeln!(
                out,
                "worker failures (502/503 upstream_error or model_unavailable, streams cut by the worker): {}",
                self.worker_failures
            );
        }
        for why in &self.broken_reasons {
            let _ = writeln!(out, "broken:   {why}");
        }
        let _ = writeln!(out, "{:<24}{:>8}{:>10}{:>10}{:>10}{:>10}", "latency ms", "n", "p50", "p95", "p99", "max");
        row(&mut out, "completed", self.latency.as_ref());
        for (kind, s) in &self.by_kind {
            row(&mut out, kind, s.latency.as_ref());
        }
        for (kind, s) in &self.by_kind {
            if s.first_token.is_some() {
                row(&mut out, &format!("first token, {kind}"), s.first_token.as_ref());
            }
        }
        let _ = writeln!(out, "told cost (sum of usage.cost): {} USD", self.told_cost.normalize());
        out
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn join<K: std::fmt::Display>(counts: &BTreeMap<K, u64>) -> String {
    counts.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", ")
}

fn row(out: &mut String, name: &str, p: Option<&Percentiles>) {
    let _ = match p {
        Some(p) => writeln!(out, "  {name:<22}{:>8}{:>10.2}{:>10.2}{:>10.2}{:>10.2}", p.count, p.p50_ms, p.p95_ms, p.p99_ms, p.max_ms),
        None => writeln!(out, "  {name:<22}{:>8}", 0),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let p = percentiles(&mut samples).unwrap();
        assert_eq!((p.count, p.p50_ms, p.p95_ms, p.p99_ms, p.max_ms), (100, 50.0, 95.0, 99.0, 100.0));
        let mut one = vec![Duration::from_micros(1500)];
        let p = percentiles(&mut one).unwrap();
        assert_eq!((p.p50_ms, p.p99_ms, p.max_ms), (1.5, 1.5, 1.5));
        // Ten samples: p95 and p99 are the largest, p50 the fifth.
        let mut ten: Vec<Duration> = (1..=10).map(Duration::from_millis).collect();
        let p = percentiles(&mut ten).unwrap();
        assert_eq!((p.p50_ms, p.p95_ms, p.p99_ms), (5.0, 10.0, 10.0));
        assert!(percentiles(&mut []).is_none());
    }
}
