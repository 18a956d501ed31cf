//! The engine: one thread owns the llama.cpp context and decodes every admitted request together
//! (continuous batching). The HTTP side talks to it through a bounded job queue, fair across tenants
//! (`queue.rs`), and per-request event channels.

mod admission;
mod closing;
mod drafts;
mod load;
mod logprobs;
mod neighbours;
mod prefix;
mod queue;
pub mod receipt;
mod repetition;
mod sampler;
mod saved;
mod scheduler;
mod slot;
mod tail;
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
    /// Answers asked for (`n`): the prompt is read once, in one sequence, and its KV cache copied to the
    /// others before each samples its own answer (`admission.rs`, `Scheduler::fork`).
    pub choices: u32,
    pub max_tokens: u32,
    pub sampling: SamplingParams,
    pub stop: Vec<String>,
    pub constraint: Option<Arc<Compiled>>,
    pub events: mpsc::UnboundedSender<ChoiceEvent>,
    pub enqueued: Instant,
    /// Whose cached prefixes this prompt may reuse (`prefix.rs`).
    pub cache_scope: CacheScope,
    /// Batch jobs give way to online ones (`admission.rs`, `scheduler.rs`).
    pub priority: Priority,
    /// Where what the request consumed is told once it leaves its sequences (`receipt.rs`); shared by
    /// the sequences of a request of several answers.
    pub receipt: Option<Arc<receipt::ReceiptWriter>>,
    /// With `logprobs: true`: how many alternatives each token lists (`logprobs.rs`).
    pub logprobs: Option<usize>,
    /// Control tokens the answer keeps as text, by id: its call format's markers, which the model's chat
    /// template names.
    pub kept: Arc<[u32]>,
}

impl Job {
    /// The job of answer `choice` (1 and up) of a request of several: the same prompt, its own sampler
    /// seed (the request's plus `choice`, so a seeded request gets the same answers each time, and not n
    /// copies of one), the same channel and receipt.
    fn sibling(&self, choice: u32) -> Self {
        let mut sampling = self.sampling;
        sampling.seed = sampling.seed.wrapping_add(u64::from(choice));
        Self {
            prompt: self.prompt.clone(),
            choices: 1,
            max_tokens: self.max_tokens,
            sampling,
            stop: self.stop.clone(),
            constraint: self.constraint.clone(),
            events: self.events.clone(),
            enqueued: self.enqueued,
            cache_scope: self.cache_scope.clone(),
            priority: self.priority,
            receipt: self.receipt.clone(),
            logprobs: self.logprobs,
            kept: Arc::clone(&self.kept),
        }
    }
}

/// An event of one of a request's answers: `choice` is the answer's index (0 for a request of one).
#[derive(Debug)]
pub struct ChoiceEvent {
    pub choice: u32,
    pub event: Event,
}

/// What the engine tells each answer of a request, in order: deltas, then exactly one `Done` or `Failed`.
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

impl Finished {
    /// What a request consumed over its answers (`n`): the prompt once, as its first answer read it, and
    /// every answer's tokens; timed from the first answer's queue and prompt to the end of the longest.
    #[must_use]
    pub fn totals(answers: &[Self]) -> (Usage, Timings) {
        let Some(first) = answers.first() else { return (Usage::new(0, 0), Timings::default()) };
        let predicted_n: u32 = answers.iter().map(|a| a.usage.completion_tokens).sum();
        let generation_ms = answers.iter().map(|a| a.timings.generation_ms).fold(0.0, f64::max);
        let usage = Usage::new(first.usage.prompt_tokens, predicted_n).with_cached(first.usage.cached_tokens());
        let timings = Timings {
            generation_ms,
            predicted_n,
            predicted_per_second: if generation_ms > 0.0 { f64::from(predicted_n) * 1000.0 / generation_ms } else { 0.0 },
            ..first.timings
        };
        (usage, timings)
    }
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
    /// Answers taken into sequences (a request of `n` answers counts n), and how each ended.
    pub admitted: AtomicU64,
    pub finished: AtomicU64,
    pub failed: AtomicU64,
    pub disconnected: AtomicU64,
    /// Prompt tokens of admitted requests, once per request however many answers it asked for.
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens found in a sequence's KV cache at admission, and not decoded again.
    pub prompt_cached_tokens: AtomicU64,
    /// Prompt tokens copied from the sequence that read them into the other answers' sequences of a
    /// request of several answers (`n`), and not decoded again.
    pub prompt_copied_tokens: AtomicU64,
    /// Prompt tokens restored from host memory (`saved.rs`) into a sequence, and not decoded again
    /// (included in `prompt_cached_tokens`); how often a sequence's KV state was saved and restored;
    /// and what is saved now.
    pub prompt_restored_tokens: AtomicU64,
    pub prompt_saves: AtomicU64,
    pub prompt_restores: AtomicU64,
    pub saved_prefixes: AtomicU64,
    pub saved_prefix_bytes: AtomicU64,
    pub completion_tokens: AtomicU64,
    /// Guessed tokens decoded beside the sampled ones (`drafts.rs`), and those sampling then chose: each
    /// of those is a decode step saved.
    pub draft_tokens: AtomicU64,
    pub draft_accepted_tokens: AtomicU64,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_of_several_is_the_request_at_its_own_seed() {
        let (events, _receiver) = mpsc::unbounded_channel();
        let request = Job {
            prompt: vec![LlamaToken::new(1), LlamaToken::new(2)],
            choices: 3,
            max_tokens: 16,
            sampling: SamplingParams { seed: u64::MAX - 1, ..SamplingParams::default() },
            stop: vec!["\n".to_owned()],
            constraint: None,
            events,
            enqueued: Instant::now(),
            cache_scope: CacheScope::default(),
            priority: Priority::default(),
            receipt: None,
            logprobs: Some(2),
            kept: Arc::from([7]),
        };
        let seeds: Vec<u64> = (1..3).map(|choice| request.sibling(choice).sampling.seed).collect();
        assert_eq!(seeds, [u64::MAX, 0], "seed + choice, wrapping");
        let second = request.sibling(1);
        assert_eq!(second.choices, 1, "an answer's own job asks for one answer");
        assert_eq!(second.prompt, request.prompt);
        assert_eq!(second.sampling, SamplingParams { seed: u64::MAX, ..request.sampling });
        assert_eq!((second.max_tokens, &second.stop, second.logprobs), (16, &request.stop, Some(2)));
        assert!(second.events.same_channel(&request.events), "every answer's events reach the one request");
        assert_eq!(&*second.kept, &[7], "and keep the same control tokens as text");
    }
}
