//! Admission: taking jobs from the queue into free sequences, the next job by the queue's fair rule
//! (`queue.rs`: the tenant holding the fewest sequences first), each onto the sequence whose KV cache
//! already holds the longest prefix of its prompt (`prefix.rs`), with the rest of that cache dropped.
//! Batch jobs never take the last free sequence (unless the engine has only one): an online request that
//! arrives while a batch fills the engine starts at once.

use std::sync::Arc;

use llama_cpp_2::token::LlamaToken;
use runaii_wire::cache_scope::CacheScope;
use runaii_wire::priority::Priority;

use super::prefix::{self, Placement};
use super::scheduler::Scheduler;
use super::slot::Active;
use super::{EngineFailure, EngineStats, Event};

impl Scheduler<'_> {
    /// Fills free sequences from the queue. Blocks while nothing is active. False once the queue closed.
    pub(super) fn admit(&mut self) -> bool {
        while self.slots.iter().any(Option::is_none) {
            let holds = |scope: &CacheScope| self.slots.iter().flatten().filter(|a| a.job.cache_scope == *scope).count();
            let job = if self.slots.iter().all(Option::is_none) {
                match self.jobs.pop_blocking(holds) {
                    Some(job) => job,
                    None => return false,
                }
            } else {
                let batch = self.slots.iter().flatten().filter(|a| a.job.priority == Priority::Batch).count();
                let lowest = if batch + 1 < self.slots.len() { Priority::Batch } else { Priority::Online };
                match self.jobs.try_pop(holds, lowest) {
                    Some(job) => job,
                    None => break,
                }
            };
            if job.events.is_closed() {
                EngineStats::add(&self.stats.disconnected, 1);
                continue;
            }
            let constraint = match job.constraint.as_ref().map(|c| c.start(self.model)).transpose() {
                Ok(c) => c,
                Err(refusal) => {
                    let _ = job.events.send(Event::Failed(EngineFailure::Constraint(refusal.to_string())));
                    continue;
                }
            };
            let free = self.slots.iter().zip(&self.caches).enumerate().filter(|(_, (s, _))| s.is_none()).map(|(i, (_, c))| (i, c));
            let Some(placement) = prefix::place(free, &job.prompt, &job.cache_scope) else { break };
            let kept = self.keep_prefix(placement);
            EngineStats::add(&self.stats.admitted, 1);
            EngineStats::add(&self.stats.prompt_tokens, job.prompt.len() as u64);
            EngineStats::add(&self.stats.prompt_cached_tokens, kept.len() as u64);
            EngineStats::add(&self.stats.active_slots, 1);
            self.slots[placement.slot] = Some(Active::new(job, constraint, kept, Arc::clone(&self.first_bytes)));
        }
        true
    }

    /// Drops the sequence's cache after the reusable prefix and returns that prefix: the tokens the new
    /// request does not decode again.
    fn keep_prefix(&mut self, placement: Placement) -> Vec<LlamaToken> {
        let Placement { slot, reused } = placement;
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
}
