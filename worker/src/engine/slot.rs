//! The state of one request while it owns a sequence in the batch.

use std::sync::Arc;
use std::time::Instant;

use llama_cpp_2::token::LlamaToken;
use runaii_wire::priority::Priority;
use runaii_wire::{FinishReason, Timings, Usage};

use super::closing::JsonTokens;
use super::drafts::{self, DraftLength};
use super::logprobs::TokenLogprobs;
use super::sampler::Sampler;
use super::text::TextAssembler;
use super::{ChoiceEvent, Event, Finished, Job};
use crate::constraint::ActiveConstraint;

/// The longest a batch sequence sits out while online sequences decode: then it takes one step with them.
pub(super) const BATCH_MAX_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct Active {
    pub job: Job,
    /// Which of the request's answers this sequence writes (0 for a request of one).
    pub choice: u32,
    /// An answer after the first of its request waits here, with nothing to feed, for the sequence (by
    /// index) that reads the prompt: that sequence's KV cache is then copied into this one, and both
    /// sample from the prompt's last logits (`Scheduler::fork`).
    pub copies_from: Option<usize>,
    /// Tokens to feed at the next decode: the prompt (in chunks), then each sampled token plus any
    /// tokens the grammar forces after it.
    pub pending: Vec<LlamaToken>,
    /// The tokens of this sequence in the KV cache, in position order: the prefix kept from the request
    /// that used the sequence before, then everything fed since. What the sequence's cache holds once
    /// this request leaves.
    pub in_cache: Vec<LlamaToken>,
    /// Prompt tokens found in the cache at admission (not decoded again).
    pub cached_tokens: u32,
    pub generated: u32,
    pub sampler: Sampler,
    pub constraint: Option<ActiveConstraint>,
    pub text: TextAssembler,
    pub admitted: Instant,
    pub first_sample: Option<Instant>,
    /// When this sequence was last in a decoded batch.
    pub last_fed: Instant,
    /// Where this sequence's logits sit in the batch just decoded.
    pub logits_at: Option<i32>,
    /// With `logprobs: true`: the tokens' log probabilities and the text held back for them.
    pub logprobs: Option<TokenLogprobs>,
    /// The rows of the batch just decoded whose logits score forced tokens (`logprobs.rs`): the first
    /// row and how many.
    pub forced_rows: Option<(i32, usize)>,
    /// The answer has ended, but its last forced tokens wait for the logits that score them: they are
    /// fed once more, then it finishes for this reason without sampling.
    pub ending: Option<FinishReason>,
    /// Guessed tokens fed after `pending` in the batch just decoded, not yet judged (`drafts.rs`): in
    /// the KV cache and in `in_cache` until sampling keeps or drops them.
    pub draft: Draft,
    pub draft_length: DraftLength,
}

/// A sequence's guessed tokens in the batch just decoded.
#[derive(Debug, Default)]
pub(super) struct Draft {
    /// The guessed tokens not yet judged, in order.
    pub tokens: Vec<LlamaToken>,
    /// The batch row of the first of `tokens`: its logits choose the token after it.
    pub row: i32,
    /// How many tokens the draft had (those not in `tokens` any more joined the answer).
    pub proposed: usize,
}

impl Active {
    /// `kept`: the prompt's leading tokens already in the sequence's KV cache.
    /// `json_tokens`: which tokens close JSON values, for closing a JSON answer in time.
    pub fn new(job: Job, constraint: Option<ActiveConstraint>, kept: Vec<LlamaToken>, json_tokens: Arc<JsonTokens>) -> Self {
        Self::answering(job, 0, constraint, kept, json_tokens)
    }

    /// Answer `choice` of a request of several, whose prompt the sequence `leader` reads.
    pub fn sibling(job: Job, choice: u32, leader: usize, constraint: Option<ActiveConstraint>, json_tokens: Arc<JsonTokens>) -> Self {
        let mut active = Self::answering(job, choice, constraint, Vec::new(), json_tokens);
        active.pending.clear();
        active.copies_from = Some(leader);
        active
    }

    fn answering(job: Job, choice: u32, constraint: Option<ActiveConstraint>, kept: Vec<LlamaToken>, json_tokens: Arc<JsonTokens>) -> Self {
        let sampler = Sampler::new(job.sampling).closing_json(job.max_tokens, json_tokens);
        let text = TextAssembler::new(job.stop.clone());
        let cached_tokens = u32::try_from(kept.len()).unwrap_or(u32::MAX);
        let logprobs = job.logprobs.map(TokenLogprobs::new);
        Self {
            pending: job.prompt.get(kept.len()..).unwrap_or_default().to_vec(),
            job,
            choice,
            copies_from: None,
            in_cache: kept,
            cached_tokens,
            generated: 0,
            sampler,
            constraint,
            text,
            admitted: Instant::now(),
            first_sample: None,
            last_fed: Instant::now(),
            logits_at: None,
            logprobs,
            forced_rows: None,
            ending: None,
            draft: Draft::default(),
            draft_length: DraftLength::new(0),
        }
    }

    /// Guesses up to `limit` drafted tokens per decode (`drafts.rs`); 0: none.
    #[must_use]
    pub fn drafting(mut self, limit: usize) -> Self {
        self.draft_length = DraftLength::new(limit);
        self
    }

    /// The tokens to guess after `pending` in the next decode, at most `room`: what followed the last
    /// tokens' earlier occurrence in the prompt or the answer, cut where the grammar would not allow it.
    /// None for an answer that scores its tokens (`logprobs`), nor under a GBNF grammar (which cannot
    /// test a token without taking it).
    pub fn guess(&mut self, room: usize) -> Vec<LlamaToken> {
        if self.logprobs.is_some() || self.first_sample.is_none() {
            return Vec::new();
        }
        let limit = self.draft_length.take().min(room).min(self.job.max_tokens.saturating_sub(self.generated) as usize);
        if limit == 0 {
            return Vec::new();
        }
        let mut guess = drafts::lookup(&self.in_cache, limit).to_vec();
        let allowed = match &mut self.constraint {
            None => guess.len(),
            Some(ActiveConstraint::Gbnf(_)) => 0,
            // A stopped matcher validates nothing.
            Some(ActiveConstraint::Llguidance(matcher)) => {
                let ids: Vec<u32> = guess.iter().map_while(|t| u32::try_from(t.0).ok()).collect();
                matcher.validate_tokens(&ids).unwrap_or(0)
            }
        };
        guess.truncate(allowed);
        guess
    }

    pub fn prompt_tokens(&self) -> u32 {
        u32::try_from(self.job.prompt.len()).unwrap_or(u32::MAX)
    }

    /// Where the next fed token goes in the sequence.
    pub fn n_past(&self) -> usize {
        self.in_cache.len()
    }

    pub fn is_prefilling(&self) -> bool {
        self.first_sample.is_none()
    }

    /// Whether this sequence sits out the next decode: a batch job does while an online one decodes,
    /// unless it has waited [`BATCH_MAX_PAUSE`] (so heavy online traffic slows a batch, never stalls it
    /// past its deadline).
    pub fn gives_way(&self, online_decoding: bool) -> bool {
        online_decoding && self.job.priority == Priority::Batch && self.last_fed.elapsed() < BATCH_MAX_PAUSE
    }

    pub fn send(&self, event: Event) {
        // A closed channel means the client left; the scheduler frees the slot on its next pass.
        let _ = self.job.events.send(ChoiceEvent { choice: self.choice, event });
    }

    /// Sends text the answer released, with the log probabilities of the tokens it completes when the
    /// request asked for them (held back while one of those still waits for its logits).
    pub fn tell(&mut self, text: String) {
        let delta = match &mut self.logprobs {
            None => (!text.is_empty()).then(|| (text, Vec::new())),
            Some(logprobs) => logprobs.release(text, self.text.through()),
        };
        if let Some((text, logprobs)) = delta {
            self.send(Event::Delta { text, logprobs, completion_tokens: self.generated, cached_tokens: self.cached_tokens });
        }
    }

    /// Sends whatever the answer still holds, at its end.
    pub fn tell_rest(&mut self) {
        let rest = self.text.finish();
        let (text, logprobs) = match &mut self.logprobs {
            None => (rest, Vec::new()),
            Some(logprobs) => logprobs.finish(rest, self.text.matched_stop().map(|_| self.text.through())),
        };
        if !text.is_empty() || !logprobs.is_empty() {
            self.send(Event::Delta { text, logprobs, completion_tokens: self.generated, cached_tokens: self.cached_tokens });
        }
    }

    pub fn finished(&self, finish_reason: FinishReason) -> Finished {
        let now = Instant::now();
        let first = self.first_sample.unwrap_or(now);
        let generation_ms = ms(now - first);
        Finished {
            finish_reason,
            stop_sequence: self.text.matched_stop().map(str::to_owned),
            usage: Usage::new(self.prompt_tokens(), self.generated).with_cached(self.cached_tokens),
            timings: Timings {
                queue_ms: ms(self.admitted.saturating_duration_since(self.job.enqueued)),
                prompt_ms: ms(first - self.admitted),
                generation_ms,
                // As llama-server counts: prompt tokens decoded, and those found in the cache.
                prompt_n: self.prompt_tokens().saturating_sub(self.cached_tokens),
                cache_n: self.cached_tokens,
                predicted_n: self.generated,
                predicted_per_second: if generation_ms > 0.0 { f64::from(self.generated) * 1000.0 / generation_ms } else { 0.0 },
            },
        }
    }
}

fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
