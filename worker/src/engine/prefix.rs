//! Prompt caching across requests: which free sequence to give a new prompt, and how much of that
//! sequence's KV cache it can keep.
//!
//! A finished request leaves its tokens in its sequence's KV cache. Structured-output traffic repeats
//! itself (the same system prompt, the same rendered schema, many documents), so the next prompt goes to
//! the free sequence whose cached tokens share the longest prefix with it, and only the rest is
//! prefilled. With no shared prefix anywhere, the least recently used sequence is taken, so the caches
//! other prompts may still want survive longest.
//!
//! A cached prefix is reused only by a request of the same cache scope (the gateway's per-tenant
//! `x-runaii-cache-scope`): another tenant's cache is, for a new prompt, no cache at all. Otherwise how
//! fast a prompt answers, and its `cached_tokens`, would tell a tenant what another tenant sent.

use llama_cpp_2::token::LlamaToken;
use runaii_wire::cache_scope::CacheScope;

/// What one sequence's KV cache holds while no request owns it.
#[derive(Debug, Default, Clone)]
pub(super) struct CachedPrefix {
    /// The tokens at positions `0..len` of the sequence, in order.
    pub tokens: Vec<LlamaToken>,
    /// When a request last left the sequence, on the scheduler's own clock (a counter).
    pub last_used: u64,
    /// Whose prompt left these tokens: only a request of the same scope may reuse them.
    pub scope: CacheScope,
}

/// The sequence a prompt is given, and how many of its leading tokens are already in that sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Placement {
    pub slot: usize,
    pub reused: usize,
}

/// Length of the common prefix of two token lists.
pub(super) fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Tokens of `prompt` that may stay in a cache holding `cached`: the common prefix, minus the prompt's
/// last token when the whole prompt is cached, because decoding that token is what yields the logits
/// of the first answer token.
pub(super) fn reusable(cached: &[LlamaToken], prompt: &[LlamaToken]) -> usize {
    common_prefix(cached, prompt).min(prompt.len().saturating_sub(1))
}

/// Picks among the free sequences (`free` yields each free slot's index and cache) the one to give
/// `prompt` of `scope`: the longest reusable prefix of the same scope wins; among equals, the least
/// recently used sequence.
pub(super) fn place<'a>(
    free: impl IntoIterator<Item = (usize, &'a CachedPrefix)>,
    prompt: &[LlamaToken],
    scope: &CacheScope,
) -> Option<Placement> {
    free.into_iter()
        .map(|(slot, cache)| {
            let reused = if cache.scope == *scope { reusable(&cache.tokens, prompt) } else { 0 };
            (Placement { slot, reused }, cache.last_used)
        })
        .max_by(|(a, a_used), (b, b_used)| a.reused.cmp(&b.reused).then(b_used.cmp(a_used)))
        .map(|(placement, _)| placement)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(ids: &[i32]) -> Vec<LlamaToken> {
        ids.iter().map(|&id| LlamaToken(id)).collect()
    }

    fn cache(ids: &[i32], last_used: u64) -> CachedPrefix {
        CachedPrefix { tokens: tokens(ids), last_used, scope: CacheScope::default() }
    }

    #[test]
    fn the_last_prompt_token_is_always_decoded_again() {
        assert_eq!(reusable(&tokens(&[1, 2, 3]), &tokens(&[1, 2, 3])), 2);
        assert_eq!(reusable(&tokens(&[1, 2, 3, 4, 5]), &tokens(&[1, 2, 3])), 2, "a longer cache holds the whole prompt");
        assert_eq!(reusable(&tokens(&[1, 2, 9]), &tokens(&[1, 2, 3, 4])), 2);
        assert_eq!(reusable(&tokens(&[]), &tokens(&[1])), 0);
        assert_eq!(reusable(&tokens(&[1]), &tokens(&[])), 0);
    }

    #[test]
    fn longest_prefix_wins_then_least_recently_used() {
        let caches = [cache(&[1, 2], 5), cache(&[1, 2, 3, 4], 9), cache(&[7], 1), cache(&[], 3)];
        let free = || caches.iter().enumerate();
        let none = CacheScope::default();
        assert_eq!(place(free(), &tokens(&[1, 2, 3, 8]), &none), Some(Placement { slot: 1, reused: 3 }));
        assert_eq!(place(free(), &tokens(&[5, 6]), &none), Some(Placement { slot: 2, reused: 0 }), "oldest when nothing is shared");
        assert_eq!(place(free().filter(|(i, _)| *i != 1), &tokens(&[1, 2, 3]), &none), Some(Placement { slot: 0, reused: 2 }));
        assert_eq!(place(std::iter::empty(), &tokens(&[1]), &none), None);
    }

    #[test]
    fn another_scope_s_cache_is_never_reused() {
        let (a, b) = (CacheScope::parse("tenant-a").unwrap(), CacheScope::parse("tenant-b").unwrap());
        let caches = [
            CachedPrefix { tokens: tokens(&[1, 2, 3, 4]), last_used: 9, scope: a.clone() },
            CachedPrefix { tokens: tokens(&[1, 2]), last_used: 5, scope: b.clone() },
        ];
        let free = || caches.iter().enumerate();
        let prompt = tokens(&[1, 2, 3, 4, 5]);
        assert_eq!(place(free(), &prompt, &a), Some(Placement { slot: 0, reused: 4 }));
        assert_eq!(place(free(), &prompt, &b), Some(Placement { slot: 1, reused: 2 }), "b's own, shorter prefix, not a's");
        assert_eq!(
            place(free(), &prompt, &CacheScope::default()),
            Some(Placement { slot: 1, reused: 0 }),
            "no scope reuses nobody's cache; the oldest sequence is taken"
        );
    }
}
