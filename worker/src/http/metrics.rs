//! `GET /metrics`: Prometheus text for requests, tokens, slots, queue and constraint compiles.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::{ApiError, AppState};
use crate::engine::EngineStats;

/// Upper bounds of the compile-time histogram, in seconds.
const COMPILE_BUCKETS: [f64; 10] = [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0];

#[derive(Debug, Default)]
pub struct HttpMetrics {
    outcomes: Mutex<BTreeMap<(u16, &'static str), u64>>,
    refusals: AtomicU64,
    compile_buckets: [AtomicU64; COMPILE_BUCKETS.len()],
    compile_count: AtomicU64,
    compile_micros: AtomicU64,
}

impl HttpMetrics {
    pub fn record_outcome(&self, error: Option<&ApiError>) {
        let key = error.map_or((200, "ok"), |e| (e.status().as_u16(), e.code()));
        let mut outcomes = self.outcomes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *outcomes.entry(key).or_default() += 1;
    }

    pub fn record_refusal(&self, error: &ApiError) {
        if matches!(error, ApiError::Refused { .. }) {
            self.refusals.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn record_compile(&self, took: Duration) {
        let secs = took.as_secs_f64();
        for (bound, bucket) in COMPILE_BUCKETS.iter().zip(&self.compile_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.compile_count.fetch_add(1, Ordering::Relaxed);
        self.compile_micros.fetch_add(u64::try_from(took.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

pub(super) async fn render(State(state): State<AppState>) -> impl IntoResponse {
    let mut out = String::new();
    let m = &state.metrics;
    let _ = writeln!(out, "# TYPE runaii_worker_requests_total counter");
    for ((status, code), n) in m.outcomes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
        let _ = writeln!(out, "runaii_worker_requests_total{{status=\"{status}\",code=\"{code}\"}} {n}");
    }
    let _ = writeln!(out, "# TYPE runaii_worker_schema_refusals_total counter");
    let _ = writeln!(out, "runaii_worker_schema_refusals_total {}", m.refusals.load(Ordering::Relaxed));
    let _ = writeln!(out, "# TYPE runaii_worker_constraint_compile_seconds histogram");
    for (bound, bucket) in COMPILE_BUCKETS.iter().zip(&m.compile_buckets) {
        let _ = writeln!(out, "runaii_worker_constraint_compile_seconds_bucket{{le=\"{bound}\"}} {}", bucket.load(Ordering::Relaxed));
    }
    let count = m.compile_count.load(Ordering::Relaxed);
    let _ = writeln!(out, "runaii_worker_constraint_compile_seconds_bucket{{le=\"+Inf\"}} {count}");
    let micros = m.compile_micros.load(Ordering::Relaxed);
    let _ = writeln!(out, "runaii_worker_constraint_compile_seconds_sum {}.{:06}", micros / 1_000_000, micros % 1_000_000);
    let _ = writeln!(out, "runaii_worker_constraint_compile_seconds_count {count}");

    let ready = state.loaded.get();
    let _ = writeln!(out, "# TYPE runaii_worker_ready gauge");
    let _ = writeln!(out, "runaii_worker_ready {}", u8::from(ready.is_some()));
    if let Some(loaded) = ready {
        let s = &loaded.stats;
        let counters = [
            ("runaii_worker_admitted_total", &s.admitted),
            ("runaii_worker_finished_total", &s.finished),
            ("runaii_worker_failed_total", &s.failed),
            ("runaii_worker_disconnected_total", &s.disconnected),
            ("runaii_worker_prompt_tokens_total", &s.prompt_tokens),
            ("runaii_worker_prompt_cached_tokens_total", &s.prompt_cached_tokens),
            ("runaii_worker_prompt_copied_tokens_total", &s.prompt_copied_tokens),
            ("runaii_worker_prompt_restored_tokens_total", &s.prompt_restored_tokens),
            ("runaii_worker_prompt_cache_saves_total", &s.prompt_saves),
            ("runaii_worker_prompt_cache_restores_total", &s.prompt_restores),
            ("runaii_worker_completion_tokens_total", &s.completion_tokens),
            ("runaii_worker_draft_tokens_total", &s.draft_tokens),
            ("runaii_worker_draft_accepted_tokens_total", &s.draft_accepted_tokens),
            ("runaii_worker_decode_steps_total", &s.decode_steps),
            ("runaii_worker_decode_microseconds_total", &s.decode_micros),
            ("runaii_worker_sample_microseconds_total", &s.sample_micros),
            ("runaii_worker_decode_thread_switches_total", &s.thread_switches),
        ];
        for (name, counter) in counters {
            let _ = writeln!(out, "# TYPE {name} counter\n{name} {}", EngineStats::get(counter));
        }
        s.latency.ttft.write(&mut out, "runaii_worker_time_to_first_token_seconds", "Enqueued to first token (queue plus prompt).");
        s.latency.tpot.write(&mut out, "runaii_worker_time_per_output_token_seconds", "Generation time per output token.");
        s.latency.e2e.write(&mut out, "runaii_worker_request_seconds", "Enqueued to last token, finished answers.");
        let _ = writeln!(
            out,
            "# TYPE runaii_worker_decode_threads gauge\nrunaii_worker_decode_threads {}",
            EngineStats::get(&s.decode_threads)
        );
        let others = EngineStats::get(&s.others_millicores);
        let _ = writeln!(
            out,
            "# TYPE runaii_worker_other_processes_cpu_cores gauge\nrunaii_worker_other_processes_cpu_cores {}.{:03}",
            others / 1000,
            others % 1000
        );
        for (name, gauge) in
            [("runaii_worker_saved_prefixes", &s.saved_prefixes), ("runaii_worker_saved_prefix_bytes", &s.saved_prefix_bytes)]
        {
            let _ = writeln!(out, "# TYPE {name} gauge\n{name} {}", EngineStats::get(gauge));
        }
        let queued = loaded.queue_depth();
        let _ = writeln!(out, "# TYPE runaii_worker_slots_busy gauge\nrunaii_worker_slots_busy {}", EngineStats::get(&s.active_slots));
        let _ = writeln!(out, "# TYPE runaii_worker_slots gauge\nrunaii_worker_slots {}", loaded.settings.slots);
        let _ = writeln!(out, "# TYPE runaii_worker_queue_depth gauge\nrunaii_worker_queue_depth {queued}");
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}
