//! The gateway's Prometheus metrics: HTTP answers by route and status; per model the requests by outcome,
//! tokens, exact cost, time to first token, time per output token and end-to-end latency; the gateway's
//! own overhead (a request's time minus the time its worker took); schema refusals; and, read from the
//! worker registry on each scrape, ready workers, busy slots and queue depth.
//!
//! One registry per process (as Prometheus client libraries do): every part of the gateway records into
//! it without threading a handle through, and tests that run several gateways in one process see sums.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use runaii_wire::announcement::WorkerStatus;
use runaii_wire::metrics::{write_gauge, Counters, Histograms, LATENCY_BUCKETS};
use rust_decimal::Decimal;

use crate::db::costs::CostRecord;

#[derive(Debug)]
pub struct Metrics {
    pub http: Counters<u64>,
    pub http_latency: Histograms,
    pub requests: Counters<u64>,
    pub tokens: Counters<u64>,
    pub cost: Counters<Decimal>,
    pub ttft: Histograms,
    pub tpot: Histograms,
    pub e2e: Histograms,
    pub overhead: Histograms,
    pub schema_refusals: Counters<u64>,
    /// Registry entries not routed to: unsigned, forged, moved or expired announcements.
    pub announcements_rejected: Counters<u64>,
    /// Postgres transactions the ledger writer committed, and the records in them: their ratio is the
    /// group size, the writes each WAL flush carries.
    pub ledger_commits: Counters<u64>,
    pub ledger_records: Counters<u64>,
    pub ledger_waits: Counters<u64>,
    /// Credit holds by kind: `lease` (in memory, against this replica's lease) or `exact` (a round trip).
    pub credit_holds: Counters<u64>,
    /// Credit lease top-ups by outcome: `taken`, `none` (too little available), `failed`.
    pub credit_lease_top_ups: Counters<u64>,
    /// Requests by how their worker was chosen: `preferred` (the one most likely to hold the prompt's
    /// prefix), `busy_fallback` (that one was full: the least loaded), `none` (no ready worker).
    pub routing: Counters<u64>,
    /// Rate-limit script calls to Redis by mode (`admit`, `spend`: tokens and unused requests sent on
    /// their own), and admissions by where they were decided (`redis`, `slice`: from requests this
    /// replica took ahead of need, or `memory`: its share while Redis could not be reached). The ratio of
    /// calls to admissions is the Redis round trips a request costs.
    pub rate_limit_calls: Counters<u64>,
    pub rate_limit_admissions: Counters<u64>,
    /// Requests refused at their tenant's cap on requests in flight, by where the count was kept
    /// (`redis`, or `local` while Redis is unavailable).
    pub concurrency_refusals: Counters<u64>,
}

#[must_use]
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(|| Metrics {
        http: Counters::new(&["route", "code"]),
        http_latency: Histograms::new(&["route"], &LATENCY_BUCKETS),
        requests: Counters::new(&["endpoint", "model", "status"]),
        tokens: Counters::new(&["model", "kind"]),
        cost: Counters::new(&["model"]),
        ttft: Histograms::new(&["model"], &LATENCY_BUCKETS),
        tpot: Histograms::new(&["model"], &LATENCY_BUCKETS),
        e2e: Histograms::new(&["model", "endpoint"], &LATENCY_BUCKETS),
        overhead: Histograms::new(&["endpoint"], &LATENCY_BUCKETS),
        schema_refusals: Counters::new(&["reason"]),
        announcements_rejected: Counters::new(&["reason"]),
        ledger_commits: Counters::new(&["kind"]),
        ledger_records: Counters::new(&["kind"]),
        ledger_waits: Counters::new(&["ended"]),
        credit_holds: Counters::new(&["kind"]),
        credit_lease_top_ups: Counters::new(&["outcome"]),
        routing: Counters::new(&["choice"]),
        rate_limit_calls: Counters::new(&["mode"]),
        rate_limit_admissions: Counters::new(&["source"]),
        concurrency_refusals: Counters::new(&["source"]),
    })
}

tokio::task_local! {
    static ARRIVED: Instant;
}

/// When the request being handled reached the gateway (now, outside a request).
#[must_use]
pub fn arrived() -> Instant {
    ARRIVED.try_with(|t| *t).unwrap_or_else(|_| Instant::now())
}

/// Runs `work` (in a task of its own) as part of the request that arrived at `at`.
pub async fn arrived_at<F: std::future::Future>(at: Instant, work: F) -> F::Output {
    ARRIVED.scope(at, work).await
}

/// Counts every answer by route template and status, and times it to its headers (a stream's length is
/// the model's business, measured by the per-model histograms).
pub async fn track(request: Request, next: Next) -> Response {
    // A clone of the matched path shares its string: no copy per request.
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let route = matched.as_ref().map_or("unmatched", MatchedPath::as_str);
    let started = Instant::now();
    let response = ARRIVED.scope(started, next.run(request)).await;
    let m = global();
    m.http.add(&[route, response.status().as_str()], 1);
    m.http_latency.observe(&[route], started.elapsed());
    response
}

impl Metrics {
    /// A request's recorded outcome, as the ledger wrote it.
    pub fn recorded(&self, record: &CostRecord, took: Duration) {
        let CostRecord { endpoint, model, status, .. } = record;
        self.requests.add(&[endpoint, model, status], 1);
        self.tokens.add(&[model, "input"], u64::from(record.input_tokens));
        self.tokens.add(&[model, "cached_input"], u64::from(record.cached_tokens));
        self.tokens.add(&[model, "output"], u64::from(record.output_tokens));
        self.cost.add(&[model], record.cost);
        if *status == "succeeded" {
            self.e2e.observe(&[model, endpoint], took);
        }
    }

    /// The worker's `timings` of a finished answer: time per output token.
    pub fn worker_timings(&self, model: &str, timings: &serde_json::Value) {
        let generation_ms = timings["generation_ms"].as_f64().unwrap_or(0.0);
        let tokens = timings["predicted_n"].as_u64().unwrap_or(0);
        if tokens > 0 && generation_ms >= 0.0 {
            #[allow(clippy::cast_precision_loss)]
            let per_token = Duration::from_secs_f64(generation_ms / 1000.0 / tokens as f64);
            self.tpot.observe(&[model], per_token);
        }
    }

    /// The gateway's own share of a request: its whole time minus the time spent waiting on the worker.
    pub fn overhead(&self, endpoint: &str, total: Duration, upstream: Duration) {
        self.overhead.observe(&[endpoint], total.saturating_sub(upstream));
    }
}

/// The exposition: the registry, plus `workers` (the worker registry's view, read by the caller) per
/// model.
#[must_use]
pub fn exposition(workers: &[WorkerStatus]) -> String {
    let m = global();
    let mut out = String::with_capacity(8192);
    m.http.write(&mut out, "runaii_gateway_http_responses_total", "HTTP answers by route template and status code.");
    m.http_latency.write(&mut out, "runaii_gateway_http_response_seconds", "Time from request to response headers, by route.");
    m.requests.write(&mut out, "runaii_gateway_requests_total", "Recorded requests by endpoint, model and outcome (one per cost record).");
    m.tokens.write(
        &mut out,
        "runaii_gateway_tokens_total",
        "Billed tokens by model and kind (input, cached_input: the part of input read from a cache, output).",
    );
    m.cost.write(&mut out, "runaii_gateway_cost_usd_total", "Billed cost in USD by model, exact (the sum of the cost records).");
    m.ttft.write(&mut out, "runaii_gateway_time_to_first_token_seconds", "Streams: request arrival to the first answer chunk.");
    m.tpot.write(&mut out, "runaii_gateway_time_per_output_token_seconds", "The worker's generation time per output token.");
    m.e2e.write(&mut out, "runaii_gateway_request_seconds", "Completed requests, arrival to cost record.");
    m.overhead.write(&mut out, "runaii_gateway_overhead_seconds", "A request's time in the gateway: total minus the wait on the worker.");
    m.schema_refusals.write(&mut out, "runaii_gateway_schema_refusals_total", "Schemas refused before any token, by reason.");
    m.announcements_rejected.write(
        &mut out,
        "runaii_gateway_worker_announcements_rejected_total",
        "Worker registry entries ignored at a refresh, by reason (bad_signature, malformed, mismatch, expired, too_far_ahead).",
    );

    m.ledger_commits.write(
        &mut out,
        "runaii_gateway_ledger_commits_total",
        "Ledger transactions committed, by kind (group, one: a failed group's records retried alone).",
    );
    m.ledger_records.write(
        &mut out,
        "runaii_gateway_ledger_records_total",
        "Cost records written by the ledger writer, by kind of transaction.",
    );
    m.ledger_waits.write(
        &mut out,
        "runaii_gateway_ledger_waits_total",
        "Commits that first waited for expected records, by how the wait ended (arrived: all of them; linger: the time was up; full, closed).",
    );
    m.credit_holds.write(
        &mut out,
        "runaii_gateway_credit_holds_total",
        "Credit holds by kind (lease: in memory, against this replica's lease; exact: a hold row, one transaction).",
    );
    m.credit_lease_top_ups.write(
        &mut out,
        "runaii_gateway_credit_lease_top_ups_total",
        "Credit lease top-ups (one transaction each) by outcome (taken, none: too little available, failed).",
    );
    m.routing.write(
        &mut out,
        "runaii_gateway_routing_total",
        "Requests by how their worker was chosen (preferred: the one likely to hold the prompt's prefix; busy_fallback: that one was full; none).",
    );
    m.rate_limit_calls.write(
        &mut out,
        "runaii_gateway_rate_limit_calls_total",
        "Rate-limit script calls to Redis, by mode (admit; spend: finished requests' tokens and unused requests sent on their own).",
    );
    m.rate_limit_admissions.write(
        &mut out,
        "runaii_gateway_rate_limit_admissions_total",
        "Requests admitted by the rate limiter, by source (redis: a call; slice: from requests this replica took ahead of need; memory: this replica's share while Redis could not be reached).",
    );
    m.concurrency_refusals.write(
        &mut out,
        "runaii_gateway_concurrency_refusals_total",
        "Requests refused at their tenant's cap on requests in flight, by where the count was kept (redis; local: Redis unavailable).",
    );

    let mut ready = std::collections::BTreeMap::<String, (u64, u64, u64)>::new();
    for w in workers {
        let e = ready.entry(w.model.clone()).or_default();
        e.0 += 1;
        e.1 += w.slots_busy;
        e.2 += w.queue_depth;
    }
    let rows = |pick: fn(&(u64, u64, u64)) -> u64| ready.iter().map(|(model, v)| (vec![model.clone()], pick(v))).collect::<Vec<_>>();
    write_gauge(&mut out, "runaii_gateway_ready_workers", "Ready workers by model.", &["model"], &rows(|v| v.0));
    write_gauge(&mut out, "runaii_gateway_worker_slots_busy", "Busy slots on ready workers, by model.", &["model"], &rows(|v| v.1));
    write_gauge(&mut out, "runaii_gateway_worker_queue_depth", "Requests queued on ready workers, by model.", &["model"], &rows(|v| v.2));
    out
}
