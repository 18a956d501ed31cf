//! The decode loop: admit jobs into free sequences (`admission.rs`), build one batch from every active
//! sequence (generating sequences first, then prompt chunks), decode, sample, repeat. While an online
//! sequence decodes, batch sequences sit out (`Active::gives_way`): on a CPU a step's time grows with
//! every sequence in it, and the online answer is the one someone waits for.

use std::sync::Arc;
use std::time::Instant;

use super::closing::JsonTokens;
use super::logprobs::{self, Allowed, Scored};
use super::prefix::CachedPrefix;
use super::queue::JobQueue;
use super::saved::SavedPrefixes;
use super::slot::{Active, Draft};
use super::threads::Governor;
use super::{EngineFailure, EngineStats, Event, Job};
use crate::constraint::ActiveConstraint;
use llama_cpp_2::context::session::{LlamaStateSeqFlags, SeqState};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::LlamaToken;
use runaii_wire::priority::Priority;
use runaii_wire::FinishReason;

pub(super) struct Scheduler<'m> {
    pub model: &'m LlamaModel,
    pub ctx: LlamaContext<'m>,
    pub jobs: Arc<JobQueue<Job>>,
    pub stats: Arc<EngineStats>,
    pub slots: Vec<Option<Active>>,
    /// What each sequence's KV cache holds while it is free (see `prefix.rs`).
    pub caches: Vec<CachedPrefix>,
    /// Counts releases: the order in which sequences were last used.
    pub clock: u64,
    /// False: every sequence is cleared on admission (`--prefix-cache false`).
    pub prefix_cache: bool,
    /// The most guessed tokens per sequence and decode (`drafts.rs`); 0: none.
    pub draft_max: usize,
    /// Sequences' KV states kept in host memory after their sequence went to another prompt (`saved.rs`).
    pub saved: SavedPrefixes<SeqState>,
    pub batch: LlamaBatch<'static>,
    pub batch_size: usize,
    /// Which tokens close JSON values, for closing JSON answers in time (`closing.rs`).
    pub json_tokens: Arc<JsonTokens>,
    /// One thread or all of them, by what other processes leave us (`threads.rs`).
    pub threads: Governor,
    /// A request of several answers that waits for enough free sequences (`admission.rs`).
    pub stashed: Option<Job>,
}

/// What one sampling step decided for a sequence.
enum Step {
    Continue,
    Finish(FinishReason),
    Fail(EngineFailure),
}

impl Scheduler<'_> {
    /// Runs until the queue is closed and empty and no sequence is active.
    pub fn run(mut self) {
        loop {
            if !self.admit() {
                return;
            }
            self.drop_disconnected();
            if self.slots.iter().any(Option::is_some) {
                self.step();
            }
        }
    }

    /// A client that left frees its sequence at once; what it consumed is already counted.
    fn drop_disconnected(&mut self) {
        for index in 0..self.slots.len() {
            if self.slots[index].as_ref().is_some_and(|a| a.job.events.is_closed()) {
                if let Some(active) = self.release(index) {
                    EngineStats::add(&self.stats.disconnected, 1);
                    tracing::info!(
                        prompt_tokens = active.prompt_tokens(),
                        completion_tokens = active.generated,
                        "client disconnected; sequence freed"
                    );
                }
            }
        }
    }

    fn step(&mut self) {
        self.batch.clear();
        let mut budget = self.batch_size;
        let online = self.slots.iter().flatten().any(|a| a.job.priority == Priority::Online);
        let mut order: Vec<usize> =
            (0..self.slots.len()).filter(|&i| self.slots[i].as_ref().is_some_and(|a| !a.gives_way(online))).collect();
        // Generating sequences first: a long prompt must not stall everyone's next token.
        order.sort_by_key(|&i| self.slots[i].as_ref().is_some_and(Active::is_prefilling));
        let mut fed = Vec::new();
        for index in order {
            let Some(active) = self.slots[index].as_mut() else { continue };
            let take = active.pending.len().min(budget);
            if take == 0 {
                continue;
            }
            let last_chunk = take == active.pending.len();
            let seq = seq_id(index);
            let start = active.n_past();
            // Forced tokens waiting to be scored: the logits of each fed position score the next token.
            let scoring = active.logprobs.as_ref().map_or(0, |l| l.awaiting.len()).min(take);
            let first_row = self.batch.n_tokens();
            let chunk: Vec<LlamaToken> = active.pending.drain(..take).collect();
            add(&mut self.batch, seq, start, &chunk, |offset| (last_chunk && offset + 1 == take) || offset < scoring);
            active.in_cache.extend(chunk);
            active.last_fed = Instant::now();
            active.logits_at = last_chunk.then(|| self.batch.n_tokens() - 1);
            active.forced_rows = (scoring > 0).then_some((first_row, scoring));
            budget -= take;
            if last_chunk {
                // What the answer is likely to say next, decoded in the same step (`drafts.rs`).
                let guess = active.guess(budget);
                let row = self.batch.n_tokens();
                add(&mut self.batch, seq, active.n_past(), &guess, |_| true);
                budget -= guess.len();
                EngineStats::add(&self.stats.draft_tokens, guess.len() as u64);
                active.in_cache.extend_from_slice(&guess);
                active.draft = Draft { proposed: guess.len(), tokens: guess, row };
            }
            fed.push(index);
        }
        if fed.is_empty() {
            return;
        }
        EngineStats::add(&self.stats.decode_steps, 1);
        self.threads.apply(&self.stats);
        let decode_started = Instant::now();
        let decoded = self.ctx.decode(&mut self.batch);
        EngineStats::add(&self.stats.decode_micros, micros(decode_started));
        if let Err(e) = decoded {
            tracing::error!(error = %e, "decode failed; failing the sequences in this batch");
            for index in fed {
                self.fail(index, EngineFailure::Decode(e.to_string()));
            }
            return;
        }
        let sample_started = Instant::now();
        for index in fed {
            if let Some(rows) = self.slots[index].as_mut().and_then(|a| a.forced_rows.take()) {
                self.score_forced(index, rows);
            }
            let Some(at) = self.slots[index].as_mut().and_then(|a| a.logits_at.take()) else { continue };
            // The prompt was just read: the request's other answers take a copy of it and sample from the
            // same logits.
            let read_prompt = self.slots[index].as_ref().is_some_and(Active::is_prefilling);
            let siblings = if read_prompt { self.fork(index) } else { Vec::new() };
            for answer in std::iter::once(index).chain(siblings) {
                let mut at = at;
                loop {
                    match self.sample(answer, at) {
                        // While sampling chooses the guessed tokens, the next choice is already computed.
                        Step::Continue => match self.take_draft(answer) {
                            Some(next) => at = next,
                            None => break,
                        },
                        Step::Finish(reason) => break self.finish(answer, reason),
                        Step::Fail(failure) => break self.fail(answer, failure),
                    }
                }
            }
        }
        EngineStats::add(&self.stats.sample_micros, micros(sample_started));
    }

    /// Copies the KV cache of `leader`, which holds exactly the prompt it just read, into each sequence
    /// waiting for it, and returns those sequences. The copy is llama.cpp's sequence state (the cells of
    /// that sequence only), written out once and read into each sibling at once: nothing is left pending
    /// for a later decode that another use of these sequences could overtake.
    fn fork(&mut self, leader: usize) -> Vec<usize> {
        let waiting: Vec<usize> =
            (0..self.slots.len()).filter(|&i| self.slots[i].as_ref().is_some_and(|a| a.copies_from == Some(leader))).collect();
        if waiting.is_empty() {
            return waiting;
        }
        let Some(prompt) = self.slots[leader].as_ref().map(|a| a.in_cache.clone()) else { return Vec::new() };
        let state = match self.ctx.state_seq_get(seq_id(leader), LlamaStateSeqFlags::empty()) {
            Ok(state) => state,
            Err(e) => {
                for index in waiting {
                    self.fail(index, EngineFailure::Decode(format!("could not copy the prompt's cache: {e}")));
                }
                return Vec::new();
            }
        };
        let mut forked = Vec::with_capacity(waiting.len());
        for index in waiting {
            match self.ctx.state_seq_set(&state, seq_id(index)) {
                Ok(()) => {
                    if let Some(active) = self.slots[index].as_mut() {
                        active.in_cache.clone_from(&prompt);
                        active.copies_from = None;
                        forked.push(index);
                        EngineStats::add(&self.stats.prompt_copied_tokens, prompt.len() as u64);
                    }
                }
                Err(e) => self.fail(index, EngineFailure::Decode(format!("could not copy the prompt's cache: {e}"))),
            }
        }
        forked
    }

    /// Samples one token for the sequence in `index`, feeds it to the constraint and the text. A sequence
    /// whose last forced tokens still wait for their log probabilities takes one more decode first.
    fn sample(&mut self, index: usize, at: i32) -> Step {
        let step = self.sample_one(index, at);
        if let (Step::Finish(reason), Some(active)) = (&step, self.slots[index].as_mut()) {
            if active.ending.is_none() && active.logprobs.as_ref().is_some_and(|l| !l.awaiting.is_empty()) {
                active.ending = Some(*reason);
                return Step::Continue;
            }
        }
        step
    }

    fn sample_one(&mut self, index: usize, at: i32) -> Step {
        let model = self.model;
        let logits = self.ctx.get_logits_ith(at);
        let Some(active) = self.slots[index].as_mut() else { return Step::Continue };
        let kept = Arc::clone(&active.job.kept);
        if let Some(reason) = active.ending {
            // The decode that scored the last forced tokens: the answer was already complete.
            return Step::Finish(reason);
        }
        if active.first_sample.is_none() {
            active.first_sample = Some(Instant::now());
        }
        let (token, scored) = match pick(active, logits) {
            Ok(picked) => picked,
            Err(failure) => return Step::Fail(failure),
        };
        if model.vocab().is_eog(token) {
            return Step::Finish(FinishReason::Stop);
        }
        let forced = match advance_constraint(active, token) {
            Ok(forced) => forced,
            Err(failure) => return Step::Fail(failure),
        };
        // `advance_constraint` already cut the forced tokens to the remaining budget.
        let mut fed = vec![token];
        fed.extend(forced);
        let produced = u32::try_from(fed.len()).unwrap_or(u32::MAX);
        active.generated += produced;
        EngineStats::add(&self.stats.completion_tokens, u64::from(produced));
        // Fed at the next decode, whether it samples or only scores the forced tokens.
        active.pending = fed;
        let mut scored = scored;
        for i in 0..active.pending.len() {
            let t = active.pending[i];
            let piece = answer_piece(model, &kept, t);
            active.sampler.record(u32::try_from(t.0).unwrap_or(u32::MAX), &piece);
            if let Some(scores) = &mut active.logprobs {
                // The sampled token is scored now; the forced ones after it when their logits come.
                let entry = scored.take().map(|s| logprobs::entry(piece.clone(), s, |id| alternative_piece(model, id)));
                scores.push(piece.len(), entry);
            }
            let released = active.text.push(&piece);
            active.tell(released.text);
            if released.stopped {
                return Step::Finish(FinishReason::Stop);
            }
        }
        if let Some(ActiveConstraint::Llguidance(matcher)) = &active.constraint {
            if matcher.is_stopped() {
                return Step::Finish(FinishReason::Stop);
            }
        }
        if active.generated >= active.job.max_tokens {
            return Step::Finish(FinishReason::Length);
        }
        Step::Continue
    }

    /// Judges the sequence's guessed tokens against what it just sampled (and the grammar forced after
    /// it), now in `pending`. Guessed tokens equal to those are already in the KV cache: they leave
    /// `pending`, and when all of `pending` was guessed, the row of the last of them holds the logits of
    /// the next choice, returned. At the first difference the rest of the guess leaves the KV cache, and
    /// what `pending` still holds is fed at the next decode.
    fn take_draft(&mut self, index: usize) -> Option<i32> {
        let active = self.slots[index].as_mut()?;
        if active.draft.tokens.is_empty() {
            return None;
        }
        let same = active.pending.iter().zip(&active.draft.tokens).take_while(|(sampled, guessed)| sampled == guessed).count();
        active.pending.drain(..same);
        active.draft.tokens.drain(..same);
        active.draft.row += i32::try_from(same).unwrap_or(i32::MAX);
        EngineStats::add(&self.stats.draft_accepted_tokens, same as u64);
        let draft = &active.draft;
        if draft.tokens.is_empty() || !active.pending.is_empty() {
            // The draft is judged: kept whole, or cut where sampling chose otherwise.
            active.draft_length.kept(draft.proposed, draft.proposed - draft.tokens.len());
        }
        if active.pending.is_empty() {
            // All of `pending` was guessed (`same` ≥ 1): the last guessed row chooses the next token.
            return Some(active.draft.row - 1);
        }
        self.drop_draft(index);
        None
    }

    /// Takes the sequence's unjudged guessed tokens out of its KV cache.
    fn drop_draft(&mut self, index: usize) {
        let Some(active) = self.slots[index].as_mut() else { return };
        let guessed = std::mem::take(&mut active.draft.tokens);
        if guessed.is_empty() {
            return;
        }
        let from = active.in_cache.len() - guessed.len();
        active.in_cache.truncate(from);
        let (seq, from) = (u32::try_from(index).ok(), u32::try_from(from).ok());
        if let Err(e) = self.ctx.clear_kv_cache_seq(seq, from, None) {
            tracing::error!(error = %e, "could not drop guessed tokens from a sequence's KV cache");
        }
    }

    /// Scores the forced tokens whose logits the decode just computed, in `rows` (first, count).
    fn score_forced(&mut self, index: usize, (first, count): (i32, usize)) {
        let model = self.model;
        let Some(active) = self.slots[index].as_mut() else { return };
        let kept = Arc::clone(&active.job.kept);
        let Some(scores) = active.logprobs.as_mut() else { return };
        for row in 0..count {
            let Some((token, mask)) = scores.awaiting.pop_front() else { break };
            let logits = self.ctx.get_logits_ith(first + i32::try_from(row).unwrap_or(i32::MAX));
            let scored = logprobs::score(logits, &Allowed::Mask(&mask), token, scores.top);
            let piece = answer_piece(model, &kept, token_of(token as usize));
            scores.scored_forced(logprobs::entry(piece, scored, |id| alternative_piece(model, id)));
        }
    }

    fn finish(&mut self, index: usize, reason: FinishReason) {
        if let Some(mut active) = self.release(index) {
            active.tell_rest();
            EngineStats::add(&self.stats.finished, 1);
            let done = active.finished(reason);
            self.stats.latency.observe(&done.timings);
            active.send(Event::Done(done));
        }
    }

    fn fail(&mut self, index: usize, failure: EngineFailure) {
        // After a failed decode nobody knows what the sequence's cache holds: it is cleared.
        if let Some(active) = self.release(index) {
            self.clear_sequence(index);
            tracing::warn!(error = %failure, "request failed in the engine");
            EngineStats::add(&self.stats.failed, 1);
            active.send(Event::Failed(failure.clone()));
        }
        // Answers still waiting for this sequence's prompt will never get it.
        let orphans: Vec<usize> =
            (0..self.slots.len()).filter(|&i| self.slots[i].as_ref().is_some_and(|a| a.copies_from == Some(index))).collect();
        for orphan in orphans {
            self.fail(orphan, failure.clone());
        }
    }

    /// Frees the sequence in `index`. Its KV cache stays, for the next prompt that shares a prefix.
    fn release(&mut self, index: usize) -> Option<Active> {
        self.drop_draft(index);
        let mut active = self.slots[index].take()?;
        if let Some(receipt) = &active.job.receipt {
            let prompt_read = u32::try_from(active.in_cache.len()).unwrap_or(u32::MAX).min(active.prompt_tokens());
            receipt.record(prompt_read, active.cached_tokens, active.generated);
        }
        self.stats.active_slots.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        self.clock += 1;
        let scope = std::mem::take(&mut active.job.cache_scope);
        self.caches[index] = CachedPrefix { tokens: std::mem::take(&mut active.in_cache), last_used: self.clock, scope };
        Some(active)
    }

    /// Empties a sequence's KV cache and what the scheduler believes it holds.
    pub(super) fn clear_sequence(&mut self, index: usize) {
        self.caches[index].tokens.clear();
        let seq = u32::try_from(index).ok();
        if let Err(e) = self.ctx.clear_kv_cache_seq(seq, None, None) {
            tracing::error!(error = %e, "could not clear a sequence's KV cache");
        }
    }
}

/// Adds `tokens` of sequence `seq` to the batch from position `start`, with logits where `logits(offset)`.
/// The caller has checked that they fit.
fn add(batch: &mut LlamaBatch<'static>, seq: i32, start: usize, tokens: &[LlamaToken], logits: impl Fn(usize) -> bool) {
    for (offset, &token) in tokens.iter().enumerate() {
        let pos = i32::try_from(start + offset).unwrap_or(i32::MAX);
        if let Err(e) = batch.add(token, pos, &[seq], logits(offset)) {
            tracing::error!(error = %e, "batch full; this should not happen with the budget check");
        }
    }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

fn seq_id(index: usize) -> i32 {
    i32::try_from(index).unwrap_or(i32::MAX)
}

/// Chooses the next token under the request's constraint and, when the request asked for log
/// probabilities, scores it under the same mask.
fn pick(active: &mut Active, logits: &[f32]) -> Result<(LlamaToken, Option<Scored>), EngineFailure> {
    let no_token = || EngineFailure::Constraint("the grammar allows no token at this point".into());
    let top = active.logprobs.as_ref().map(|l| l.top);
    let (token, scored) = match &mut active.constraint {
        None => {
            let token = active.sampler.sample(logits, |_| true).ok_or_else(no_token)?;
            (token, top.map(|top| logprobs::score(logits, &Allowed::All, token, top)))
        }
        Some(ActiveConstraint::Llguidance(matcher)) => {
            let mask = matcher.compute_mask_or_eos().map_err(|e| EngineFailure::Constraint(e.to_string()))?;
            // Trials of the tokens a string could close after, which the matcher undoes.
            let accepts = |tokens: &[u32]| matcher.validate_tokens(tokens).unwrap_or(0);
            let token = active.sampler.sample_steered(logits, |id| mask.is_allowed(id), accepts).ok_or_else(no_token)?;
            (token, top.map(|top| logprobs::score(logits, &Allowed::Mask(&mask), token, top)))
        }
        Some(ActiveConstraint::Gbnf(grammar)) => {
            // llama-server's trick: try the unconstrained choice first and mask the whole vocabulary only
            // when the grammar rejects it; masking 49k candidates through llama.cpp's grammar every step
            // halves the speed. Log probabilities need the whole mask: only a request that asked pays.
            let first = active.sampler.sample(logits, |_| true).ok_or_else(no_token)?;
            let mut allowed = None;
            let token = if gbnf_allows(grammar, first, logits) {
                first
            } else {
                let listed = allowed.insert(gbnf_mask(grammar, logits));
                active.sampler.sample(logits, |id| listed.get(id as usize).copied().unwrap_or(false)).ok_or_else(no_token)?
            };
            let scored = top.map(|top| {
                let listed = allowed.get_or_insert_with(|| gbnf_mask(grammar, logits));
                logprobs::score(logits, &Allowed::Listed(listed), token, top)
            });
            (token, scored)
        }
    };
    Ok((LlamaToken(i32::try_from(token).map_err(|_| no_token())?), scored))
}

/// Which tokens the GBNF grammar allows next, by id.
fn gbnf_mask(grammar: &mut llama_cpp_2::sampling::LlamaSampler, logits: &[f32]) -> Vec<bool> {
    let mut all =
        LlamaTokenDataArray::new(logits.iter().enumerate().map(|(id, &l)| LlamaTokenData::new(token_of(id), l, 0.0)).collect(), false);
    all.apply_sampler(grammar);
    all.data.iter().map(|d| d.logit().is_finite()).collect()
}

fn gbnf_allows(grammar: &mut llama_cpp_2::sampling::LlamaSampler, token: u32, logits: &[f32]) -> bool {
    let logit = logits.get(token as usize).copied().unwrap_or(f32::NEG_INFINITY);
    let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token_of(token as usize), logit, 0.0)], false);
    one.apply_sampler(grammar);
    one.data.first().is_some_and(|d| d.logit().is_finite())
}

/// A token's bytes in the answer: its text, and for the control tokens the answer keeps, their name.
fn answer_piece(model: &LlamaModel, kept: &[u32], token: LlamaToken) -> Vec<u8> {
    let keep = u32::try_from(token.0).is_ok_and(|id| kept.contains(&id));
    model.vocab().token_to_piece(token, keep, None)
}

/// An alternative token's bytes: its text, or for a control token with no text (end of turn) its name,
/// so that a reader sees what the model weighed.
fn alternative_piece(model: &LlamaModel, id: u32) -> Vec<u8> {
    let token = token_of(id as usize);
    let piece = model.vocab().token_to_piece(token, false, None);
    if piece.is_empty() {
        model.vocab().token_to_piece(token, true, None)
    } else {
        piece
    }
}

fn token_of(id: usize) -> LlamaToken {
    LlamaToken(i32::try_from(id).unwrap_or(i32::MAX))
}

/// Feeds the sampled token to the constraint, exactly once, and returns the tokens the grammar forces
/// next (llguidance's fast-forward: decoded in one batch instead of one step each).
fn advance_constraint(active: &mut Active, token: LlamaToken) -> Result<Vec<LlamaToken>, EngineFailure> {
    let id = u32::try_from(token.0).map_err(|_| EngineFailure::Constraint("negative token id".into()))?;
    match &mut active.constraint {
        None => Ok(Vec::new()),
        Some(ActiveConstraint::Gbnf(grammar)) => {
            grammar.try_accept(token).map_err(|e| EngineFailure::Constraint(e.to_string()))?;
            Ok(Vec::new())
        }
        Some(ActiveConstraint::Llguidance(matcher)) => {
            matcher.consume_token(id).map_err(|e| EngineFailure::Constraint(e.to_string()))?;
            if matcher.is_stopped() {
                return Ok(Vec::new());
            }
            let forced = matcher.compute_ff_tokens();
            let budget = active.job.max_tokens.saturating_sub(active.generated + 1) as usize;
            let forced = &forced[..forced.len().min(budget)];
            match &mut active.logprobs {
                None => matcher.consume_tokens(forced).map_err(|e| EngineFailure::Constraint(e.to_string()))?,
                // Each forced token is scored later under the mask the grammar allowed before it.
                Some(scores) => {
                    for &t in forced {
                        let mask = matcher.compute_mask_or_eos().map_err(|e| EngineFailure::Constraint(e.to_string()))?;
                        matcher.consume_token(t).map_err(|e| EngineFailure::Constraint(e.to_string()))?;
                        scores.awaiting.push_back((t, mask));
                    }
                }
            }
            Ok(forced.iter().map(|&t| token_of(t as usize)).collect())
        }
    }
}
