//! The engine: one thread owns the llama.cpp context and decodes every admitted request together
//! (continuous batching). The HTTP side talks to it through a bounded job queue, fair across tenants
//! (`queue.rs`), and per-request event channels.

mod admission;
mod closing;
mod load;
mod logprobs;
mod neighbours;
mod prefix;
mod queue;
pub mod receipt;
mod repetition;
mod sampler;
mod scheduler;
mod slot;
mod text;
mod threads;

use runaii_wire::metrics::{Histograms, LATENCY_BUCKETS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use llama_cpp_2::token::LlamaToken;
use runaii_wire::cache_scope::CacheScope;
use runaii_wire::priority::Priority;
use runaii_wire::{FinishReason, Timings, TokenLogprob, Usage};
use tokio::sync::mpsc;

use crate::constraint::Compiled;

pub use load::{load, LoadSettings, Loaded};
pub use queue::JobQueue;
pub use repetition::{Dry, Penalties};
pub use sampler::SamplingParams;

/// One admitted request, as the engine sees it.
#[derive(Debug)]
pub struct Job {
    pub prompt: Vec<LlamaToken>,
    pub max_tokens: u32,
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    pub constraint: Option<Arc<Compiled>>,
    pub events: mpsc::UnboundedSender<Event>,
    pub enqueued: Instant,
    /// Whose cached prefixes this prompt may reuse (`prefix.rs`).
    pub cache_scope: CacheScope,
    /// Batch jobs give way to online ones (`admission.rs`, `scheduler.rs`).
    pub priority: Priority,
    /// Where what the request consumed is told once it leaves its sequence (`receipt.rs`).
    pub receipt: Option<receipt::ReceiptWriter>,
    /// With `logprobs: true`: how many alternatives each token lists (`logprobs.rs`).
    pub logprobs: Option<usize>,
}

/// What the engine tells a request, in order: deltas, then exactly one `Done` or `Failed`.
#[derive(Debug)]
pub enum Event {
    /// New text, how many tokens this request has generated so far, and how many of its prompt tokens
    /// came from the cache (for the running usage of a stream a client may abandon). With `logprobs`,
    /// the entries of the tokens this text completes (empty otherwise).
    Delta {
        text: String,
        logprobs: Vec<TokenLogprob>,
        completion_tokens: u32,
        cached_tokens: u32,
    },
    Done(Finished),
    Failed(EngineFailure),
}

#[derive(Debug, Clone)]
pub struct Finished {
    pub finish_reason: FinishReason,
    /// The stop sequence that ended the answer, if one did.
    pub stop_sequence: Option<String>,
    pub usage: Usage,
    pub timings: Timings,
}

/// A request that failed after admission. Its tokens are still counted in the engine's totals.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineFailure {
    /// The constraint engine errored mid-answer; we stop rather than continue unconstrained.
    #[error("the constraint engine failed while generating: {0}")]
    Constraint(String),
    #[error("llama.cpp failed to decode: {0}")]
    Decode(String),
}

/// Counters the engine keeps for `/metrics` and `/health`.
#[derive(Debug, Default)]
pub struct EngineStats {
    pub admitted: AtomicU64,
    pub finished: AtomicU64,
    pub failed: AtomicU64,
    pub disconnected: AtomicU64,
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens found in a sequence's KV cache at admission, and not decoded again.
    pub prompt_cached_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
    pub active_slots: AtomicU64,
    pub decode_steps: AtomicU64,
    /// Time spent inside llama.cpp's decode, and choosing tokens (masking + sampling), in microseconds.
    pub decode_micros: AtomicU64,
    pub sample_micros: AtomicU64,
    /// Threads the last decode ran with: the configured count, or one while other processes are busy on
    /// our cores (`threads.rs`).
    pub decode_threads: AtomicU64,
    pub thread_switches: AtomicU64,
    /// Other processes' CPU on our cores, smoothed, in thousandths of a core.
    pub others_millicores: AtomicU64,
    pub latency: Latency,
}

/// Histograms of finished answers' timings.
#[derive(Debug)]
pub struct Latency {
    /// Enqueued to first sampled token: queue plus prompt.
    pub ttft: Histograms,
    pub tpot: Histograms,
    /// Enqueued to the last token.
    pub e2e: Histograms,
}

impl Default for Latency {
    fn default() -> Self {
        Self {
            ttft: Histograms::new(&[], &LATENCY_BUCKETS),
            tpot: Histograms::new(&[], &LATENCY_BUCKETS),
            e2e: Histograms::new(&[], &LATENCY_BUCKETS),
        }
    }
}

impl Latency {
    pub fn observe(&self, t: &runaii_wire::Timings) {
        let ms = |v: f64| std::time::Duration::from_secs_f64((v / 1000.0).max(0.0));
        self.ttft.observe(&[], ms(t.queue_ms + t.prompt_ms));
        self.e2e.observe(&[], ms(t.queue_ms + t.prompt_ms + t.generation_ms));
        if t.predicted_n > 0 {
            self.tpot.observe(&[], ms(t.generation_ms / f64::from(t.predicted_n)));
        }
    }
}

impl EngineStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    #[must_use]
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
