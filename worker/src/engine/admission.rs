//! Admission: taking jobs from the queue into free sequences, the next job by the queue's fair rule
//! (`queue.rs`: the tenant holding the fewest sequences first), each onto the sequence whose KV cache
//! already holds the longest prefix of its prompt (`prefix.rs`), with the rest of that cache dropped.
//! Batch jobs never take the last free sequence (unless the engine has only one): an online request that
//! arrives while a batch fills the engine starts at once. A request of several answers (`n`) takes one
//! sequence per answer at once; only the first reads the prompt (`Scheduler::fork`).

use std::sync::Arc;

use llama_cpp_2::context::session::LlamaStateSeqFlags;
use llama_cpp_2::token::LlamaToken;
use runaii_wire::cache_scope::CacheScope;
use runaii_wire::priority::Priority;

use super::prefix::{self, CachedPrefix, Placement};
use super::saved;
use super::scheduler::Scheduler;
use super::slot::Active;
use super::{ChoiceEvent, EngineFailure, EngineStats, Event, Job};

impl Scheduler<'_> {
    /// Fills free sequences from the queue. Blocks while nothing is active. False once the queue closed.
    ///
    /// A request of several answers takes its sequences together; one that does not fit yet waits,
    /// ahead of every later job of its class, until enough sequences free (a batch request lets online
    /// jobs pass meanwhile).
    pub(super) fn admit(&mut self) -> bool {
        while self.slots.iter().any(Option::is_none) {
            let Some(job) = self.next_job() else { return false };
            let Some(job) = job else { break };
            if job.events.is_closed() {
                EngineStats::add(&self.stats.disconnected, 1);
                continue;
            }
            let choices = (job.choices.max(1) as usize).min(self.slots.len());
            if choices > self.room(job.priority) {
                self.stashed = Some(job);
                break;
            }
            let constraints: Result<Vec<_>, _> =
                (0..choices).map(|_| job.constraint.as_ref().map(|c| c.start(self.model)).transpose()).collect();
            let mut constraints = match constraints {
                Ok(c) => c.into_iter(),
                Err(refusal) => {
                    let _ =
                        job.events.send(ChoiceEvent { choice: 0, event: Event::Failed(EngineFailure::Constraint(refusal.to_string())) });
                    continue;
                }
            };
            let free = self.slots.iter().zip(&self.caches).enumerate().filter(|(_, (s, _))| s.is_none()).map(|(i, (_, c))| (i, c));
            let Some(placement) = prefix::place(free, &job.prompt, &job.cache_scope) else { break };
            let siblings = self.siblings(placement.slot, choices - 1);
            let placement = self.recall(placement, &job.prompt, &job.cache_scope);
            let kept = self.keep_prefix(placement);
            EngineStats::add(&self.stats.admitted, choices as u64);
            EngineStats::add(&self.stats.prompt_tokens, job.prompt.len() as u64);
            EngineStats::add(&self.stats.prompt_cached_tokens, kept.len() as u64);
            EngineStats::add(&self.stats.active_slots, choices as u64);
            for (choice, slot) in (1..).zip(siblings) {
                // Emptied now: the copy of the prompt's cache replaces whatever it held.
                self.spill(slot);
                self.clear_sequence(slot);
                let sibling = job.sibling(choice);
                let constraint = constraints.next().flatten();
                self.slots[slot] = Some(
                    Active::sibling(sibling, choice, placement.slot, constraint, Arc::clone(&self.json_tokens)).drafting(self.draft_max),
                );
            }
            let constraint = constraints.next().flatten();
            self.slots[placement.slot] = Some(Active::new(job, constraint, kept, Arc::clone(&self.json_tokens)).drafting(self.draft_max));
        }
        true
    }

    /// The next job to admit: a request waiting for room first (though online jobs pass a waiting batch
    /// request), else the queue's next by the fair rule. `None` once the queue closed; `Some(None)` when
    /// nothing waits that may start now.
    fn next_job(&mut self) -> Option<Option<Job>> {
        let holds = |scope: &CacheScope| self.slots.iter().flatten().filter(|a| a.job.cache_scope == *scope).count();
        if let Some(stashed) = self.stashed.take() {
            if stashed.priority == Priority::Batch {
                if let Some(online) = self.jobs.try_pop(holds, Priority::Online) {
                    self.stashed = Some(stashed);
                    return Some(Some(online));
                }
            }
            return Some(Some(stashed));
        }
        if self.slots.iter().all(Option::is_none) {
            return self.jobs.pop_blocking(holds).map(Some);
        }
        let batch = self.slots.iter().flatten().filter(|a| a.job.priority == Priority::Batch).count();
        let lowest = if batch + 1 < self.slots.len() { Priority::Batch } else { Priority::Online };
        Some(self.jobs.try_pop(holds, lowest))
    }

    /// How many sequences a job of `priority` may take now: every free one, except that batch jobs leave
    /// one free for online work (unless the engine is idle).
    fn room(&self, priority: Priority) -> usize {
        let free = self.slots.iter().filter(|s| s.is_none()).count();
        if priority == Priority::Online || free == self.slots.len() {
            return free;
        }
        let batch = self.slots.iter().flatten().filter(|a| a.job.priority == Priority::Batch).count();
        free.min(self.slots.len().saturating_sub(batch + 1))
    }

    /// `count` free sequences other than `leader` for a request's further answers, the least recently
    /// used first (their caches are the least likely to be wanted again).
    fn siblings(&self, leader: usize, count: usize) -> Vec<usize> {
        let mut free: Vec<usize> = (0..self.slots.len()).filter(|&i| i != leader && self.slots[i].is_none()).collect();
        free.sort_by_key(|&i| self.caches[i].last_used);
        free.truncate(count);
        free
    }

    /// Drops the sequence's cache after the reusable prefix and returns that prefix: the tokens the new
    /// request does not decode again.
    fn keep_prefix(&mut self, placement: Placement) -> Vec<LlamaToken> {
        let Placement { slot, reused } = placement;
        if reused < self.caches[slot].tokens.len() {
            self.spill(slot);
        }
        if !self.prefix_cache || reused == 0 {
            self.clear_sequence(slot);
            return Vec::new();
        }
        let (Ok(seq), Ok(from)) = (u32::try_from(slot), u32::try_from(reused)) else {
            self.clear_sequence(slot);
            return Vec::new();
        };
        match self.ctx.clear_kv_cache_seq(Some(seq), Some(from), None) {
            Ok(true) => {
                let mut kept = std::mem::take(&mut self.caches[slot].tokens);
                kept.truncate(reused);
                kept
            }
            // Some caches (recurrent models) cannot drop a sequence's tail: start that sequence afresh.
            outcome => {
                tracing::debug!(?outcome, "a cached prefix could not be cut; decoding the whole prompt");
                self.clear_sequence(slot);
                Vec::new()
            }
        }
    }

    /// Saves the free sequence's KV state to host memory before its cache is cut or replaced, when what it
    /// holds is worth keeping (`saved.rs`).
    fn spill(&mut self, slot: usize) {
        let cache = &self.caches[slot];
        if !self.saved.wants(&cache.tokens, &cache.scope) {
            return;
        }
        let Ok(seq) = i32::try_from(slot) else { return };
        match self.ctx.state_seq_get(seq, LlamaStateSeqFlags::empty()) {
            Ok(state) => {
                let bytes = state.byte_len();
                self.saved.save(cache.scope.clone(), cache.tokens.clone(), state, bytes);
                EngineStats::add(&self.stats.prompt_saves, 1);
                self.count_saved();
            }
            Err(e) => tracing::debug!(error = %e, "a sequence's KV state could not be saved"),
        }
    }

    /// Restores into the placement's sequence the saved state that holds more of `prompt` than that
    /// sequence's cache does (by [`saved::MIN_GAIN`] at least), saving what the sequence held first. The
    /// placement as it then stands: the restored tokens are the prompt's cached prefix.
    fn recall(&mut self, placement: Placement, prompt: &[LlamaToken], scope: &CacheScope) -> Placement {
        let worth = |&(_, reused): &(usize, usize)| reused >= placement.reused + saved::MIN_GAIN;
        if !self.prefix_cache || self.saved.best(prompt, scope).filter(worth).is_none() {
            return placement;
        }
        // Saving what the sequence holds may drop entries: the best one is looked up again after.
        self.spill(placement.slot);
        let Some((entry, reused)) = self.saved.best(prompt, scope).filter(worth) else { return placement };
        let Ok(seq) = i32::try_from(placement.slot) else { return placement };
        let Some((tokens, state)) = self.saved.recall(entry) else { return placement };
        let tokens = tokens.to_vec();
        match self.ctx.state_seq_set(state, seq) {
            Ok(()) => {
                EngineStats::add(&self.stats.prompt_restores, 1);
                EngineStats::add(&self.stats.prompt_restored_tokens, reused as u64);
                self.caches[placement.slot] = CachedPrefix { tokens, last_used: self.clock, scope: scope.clone() };
                Placement { slot: placement.slot, reused }
            }
            Err(e) => {
                tracing::warn!(error = %e, "a saved KV state could not be restored; decoding the whole prompt");
                self.clear_sequence(placement.slot);
                Placement { slot: placement.slot, reused: 0 }
            }
        }
    }

    fn count_saved(&self) {
        self.stats.saved_prefixes.store(self.saved.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.stats.saved_prefix_bytes.store(self.saved.bytes() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}
