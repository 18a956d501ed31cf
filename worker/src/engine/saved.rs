//! The prompt cache beyond the sequences: a sequence's KV state saved to host memory when its sequence is
//! given to a prompt that would drop it, and restored into a sequence when a later prompt of the same
//! cache scope shares more of it than any free sequence's cache does (`admission.rs`). Without it, a
//! prefix survives only while no other prompt takes its sequence: eight other streams, and a tenant's
//! long system prompt is read again from the start.
//!
//! Bounded in bytes (`--prompt-cache-mib`), least recently used out first; one scope (a tenant) holds at
//! most half of the room, so one tenant's flood of long prompts leaves the rest to the others. Only
//! prefixes of at least [`MIN_TOKENS`] are kept: a shorter one is decoded again faster than it is found.
//! An entry is only ever read by a prompt of its own scope, as the sequences' caches are (`prefix.rs`).
//!
//! Generic over the saved state, so the policy is tested without an engine.

use llama_cpp_2::token::LlamaToken;
use runaii_wire::cache_scope::CacheScope;

use super::prefix::reusable;

/// The fewest tokens worth saving or restoring.
pub(super) const MIN_TOKENS: usize = 256;

/// A restore must reuse at least this many tokens more than the best free sequence's cache does.
pub(super) const MIN_GAIN: usize = 64;

#[derive(Debug)]
struct Entry<S> {
    scope: CacheScope,
    tokens: Vec<LlamaToken>,
    state: S,
    bytes: usize,
    last_used: u64,
}

#[derive(Debug)]
pub(super) struct SavedPrefixes<S> {
    entries: Vec<Entry<S>>,
    budget: usize,
    bytes: usize,
    clock: u64,
}

impl<S> SavedPrefixes<S> {
    pub(super) fn new(budget: usize) -> Self {
        Self { entries: Vec::new(), budget, bytes: 0, clock: 0 }
    }

    pub(super) fn enabled(&self) -> bool {
        self.budget > 0
    }

    /// The entry of `scope` that holds the longest reusable prefix of `prompt`: its index and how many
    /// tokens of the prompt it holds.
    pub(super) fn best(&self, prompt: &[LlamaToken], scope: &CacheScope) -> Option<(usize, usize)> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.scope == *scope)
            .map(|(i, e)| (i, reusable(&e.tokens, prompt)))
            .filter(|&(_, reused)| reused >= MIN_TOKENS)
            .max_by_key(|&(_, reused)| reused)
    }

    /// Entry `index`'s tokens and state, marked as just used.
    pub(super) fn recall(&mut self, index: usize) -> Option<(&[LlamaToken], &S)> {
        self.clock += 1;
        let entry = self.entries.get_mut(index)?;
        entry.last_used = self.clock;
        Some((&entry.tokens, &entry.state))
    }

    /// Whether `tokens` of `scope` are worth saving: long enough, and not already within an entry.
    pub(super) fn wants(&self, tokens: &[LlamaToken], scope: &CacheScope) -> bool {
        self.enabled() && tokens.len() >= MIN_TOKENS && !self.entries.iter().any(|e| e.scope == *scope && e.tokens.starts_with(tokens))
    }

    /// Keeps `state` (of `bytes`), which holds `tokens` of `scope`. Entries of the scope that hold a prefix
    /// of `tokens` are dropped (this one holds all they do); then the least recently used entries, the
    /// scope's own first while it holds more than half the room, until it fits. A state larger than half
    /// the room is not kept.
    pub(super) fn save(&mut self, scope: CacheScope, tokens: Vec<LlamaToken>, state: S, bytes: usize) {
        let share = self.budget / 2;
        if bytes > share || !self.wants(&tokens, &scope) {
            return;
        }
        self.drop_where(|e| e.scope == scope && tokens.starts_with(&e.tokens));
        while self.held_by(&scope) + bytes > share {
            self.drop_oldest(Some(&scope));
        }
        while self.bytes + bytes > self.budget {
            self.drop_oldest(None);
        }
        self.clock += 1;
        self.bytes += bytes;
        self.entries.push(Entry { scope, tokens, state, bytes, last_used: self.clock });
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    fn held_by(&self, scope: &CacheScope) -> usize {
        self.entries.iter().filter(|e| e.scope == *scope).map(|e| e.bytes).sum()
    }

    fn drop_oldest(&mut self, scope: Option<&CacheScope>) {
        let oldest = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| scope.is_none_or(|s| e.scope == *s))
            .min_by_key(|(_, e)| e.last_used)
            .map(|(i, _)| i);
        if let Some(i) = oldest {
            let entry = self.entries.swap_remove(i);
            self.bytes -= entry.bytes;
        }
    }

    fn drop_where(&mut self, gone: impl Fn(&Entry<S>) -> bool) {
        let mut freed = 0;
        self.entries.retain(|e| {
            let drop = gone(e);
            if drop {
                freed += e.bytes;
            }
            !drop
        });
        self.bytes -= freed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(from: i32, len: usize) -> Vec<LlamaToken> {
        (0..len).map(|i| LlamaToken(from + i32::try_from(i).unwrap())).collect()
    }

    fn scope(name: &str) -> CacheScope {
        CacheScope::parse(name).unwrap()
    }

    #[test]
    fn the_longest_prefix_of_the_same_scope_is_found() {
        let mut saved = SavedPrefixes::new(10_000);
        let a = scope("tenant-a");
        saved.save(a.clone(), tokens(0, 300), "short", 100);
        saved.save(a.clone(), tokens(1_000, 600), "other", 100);
        let mut prompt = tokens(1_000, 500);
        prompt.extend(tokens(9_000, 50));
        assert_eq!(saved.best(&prompt, &a), Some((1, 500)));
        assert_eq!(saved.best(&prompt, &scope("tenant-b")), None, "another scope's entries are not there for it");
        assert_eq!(saved.best(&tokens(0, 200), &a), None, "fewer than MIN_TOKENS shared");
        assert_eq!(saved.recall(1).map(|(t, s)| (t.len(), *s)), Some((600, "other")));
    }

    #[test]
    fn a_longer_entry_replaces_its_prefixes_and_a_covered_one_is_not_saved() {
        let mut saved = SavedPrefixes::new(10_000);
        let a = scope("tenant-a");
        saved.save(a.clone(), tokens(0, 300), 1, 100);
        saved.save(a.clone(), tokens(0, 400), 2, 100);
        assert_eq!((saved.len(), saved.bytes()), (1, 100), "the 300 tokens are within the 400");
        assert!(!saved.wants(&tokens(0, 350), &a));
        saved.save(a.clone(), tokens(0, 350), 3, 100);
        assert_eq!(saved.len(), 1);
        assert!(saved.wants(&tokens(0, 350), &scope("tenant-b")), "another scope saves its own");
        assert!(!saved.wants(&tokens(0, MIN_TOKENS - 1), &scope("tenant-b")));
    }

    #[test]
    fn the_least_recently_used_go_first_and_a_scope_holds_half_the_room_at_most() {
        let (a, b) = (scope("tenant-a"), scope("tenant-b"));
        let mut saved = SavedPrefixes::new(1_000);
        saved.save(b.clone(), tokens(50_000, 300), "b1", 300);
        for i in 0..5 {
            saved.save(a.clone(), tokens(i * 1_000, 300), "a", 200);
        }
        // A's five entries of 200 never take more than 500: b's entry survives A's flood.
        assert!(saved.best(&tokens(50_000, 300), &b).is_some(), "b's prefix outlives a's flood");
        assert!(saved.bytes() <= 1_000);
        assert_eq!(saved.best(&tokens(0, 300), &a), None, "a's oldest went first");
        assert!(saved.best(&tokens(4_000, 300), &a).is_some());
        // Recalled entries are the last to go.
        let (i, _) = saved.best(&tokens(3_000, 300), &a).unwrap();
        saved.recall(i);
        saved.save(a.clone(), tokens(7_000, 300), "a", 200);
        assert!(saved.best(&tokens(3_000, 300), &a).is_some());
        assert_eq!(saved.best(&tokens(4_000, 300), &a), None);
        // Larger than a scope's share: not kept at all.
        saved.save(b.clone(), tokens(60_000, 300), "huge", 600);
        assert_eq!(saved.best(&tokens(60_000, 300), &b), None);
        let mut none = SavedPrefixes::new(0);
        none.save(a.clone(), tokens(0, 300), "x", 1);
        assert_eq!(none.len(), 0, "a budget of 0 keeps nothing");
    }
}
