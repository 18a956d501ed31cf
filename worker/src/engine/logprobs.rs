//! Log probabilities of the answer's tokens, for the requests that ask for them (`logprobs: true`).
//!
//! Each token is scored from the logits of the decode step that produced it: the model's distribution
//! over the tokens the request's grammar allows at that step, renormalised over them (without a
//! grammar, over the whole vocabulary), at temperature 1 and before the penalties, top-k and top-p.
//! That is the distribution the sampler chooses from before its own adjustments, so a greedy answer's
//! tokens are the most likely ones here (unless a penalty moved the choice).
//!
//! Tokens the grammar forces (llguidance's fast-forward) are appended without a sampling step: the
//! engine keeps the mask the grammar allowed before each of them, asks the next decode for the logits of
//! every position it feeds, and scores them then. Until a token is scored, the text it ends is held back,
//! so each delta carries the log probabilities of exactly the tokens its text completes.
//!
//! Sequences that did not ask never reach this module: nothing here runs on the normal path.

use std::collections::VecDeque;

use runaii_wire::{TokenLogprob, TopLogprob};
use toktrie::SimpleVob;

/// Which tokens the grammar allowed at a step.
pub(super) enum Allowed<'a> {
    All,
    Mask(&'a SimpleVob),
    Listed(&'a [bool]),
}

impl Allowed<'_> {
    fn allows(&self, id: u32) -> bool {
        match self {
            Self::All => true,
            Self::Mask(mask) => mask.is_allowed(id),
            Self::Listed(allowed) => allowed.get(id as usize).copied().unwrap_or(false),
        }
    }
}

/// A token's log probability and the most likely tokens at its step (ids with theirs, best first).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Scored {
    pub logprob: f32,
    pub top: Vec<(u32, f32)>,
}

/// The lowest log probability reported: OpenAI's floor for a token that is all but impossible, and what
/// keeps a value finite (JSON has no infinity).
const FLOOR: f32 = -9999.0;

/// Scores `chosen` at a step with these `logits`: `log p(chosen)` under the softmax of the logits the
/// grammar allows, and the `top` most likely allowed tokens. One pass over the vocabulary.
pub(super) fn score(logits: &[f32], allowed: &Allowed<'_>, chosen: u32, top: usize) -> Scored {
    // log Σ exp(l), kept as (max, Σ exp(l − max)) so that no exponent overflows.
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0.0_f64);
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(top + 1);
    for (id, &logit) in logits.iter().enumerate() {
        let Ok(id) = u32::try_from(id) else { break };
        if !logit.is_finite() || !allowed.allows(id) {
            continue;
        }
        if logit > max {
            sum = sum * f64::from(max - logit).exp() + 1.0;
            max = logit;
        } else {
            sum += f64::from(logit - max).exp();
        }
        if top > 0 && (best.len() < top || best.last().is_some_and(|&(_, l)| logit > l)) {
            // Ties keep the lower id first, as the vocabulary is walked in order.
            let at = best.partition_point(|&(_, l)| l >= logit);
            best.insert(at, (id, logit));
            best.truncate(top);
        }
    }
    let normaliser = f64::from(max) + sum.ln();
    let log_p = |logit: f32| ((f64::from(logit) - normaliser) as f32).clamp(FLOOR, 0.0);
    let chosen_logit = logits.get(chosen as usize).copied().filter(|l| l.is_finite() && allowed.allows(chosen));
    Scored { logprob: chosen_logit.map_or(FLOOR, log_p), top: best.into_iter().map(|(id, logit)| (id, log_p(logit))).collect() }
}

/// A scored token as the wire writes it: `bytes` are the token's own (as the answer's text has them),
/// `piece` gives each alternative's.
pub(super) fn entry(bytes: Vec<u8>, scored: Scored, piece: impl Fn(u32) -> Vec<u8>) -> TokenLogprob {
    let top = scored.top.into_iter().map(|(id, logprob)| TopLogprob::new(piece(id), logprob)).collect();
    let alone = TopLogprob::new(bytes, scored.logprob);
    TokenLogprob { token: alone.token, logprob: alone.logprob, bytes: alone.bytes, top_logprobs: top }
}

/// One token of the answer not yet sent: where its bytes lie in the answer, and its entry once scored.
#[derive(Debug)]
struct Unsent {
    start: usize,
    end: usize,
    entry: Option<TokenLogprob>,
}

/// The log probabilities of one sequence that asked for them, and the text held back for them.
#[derive(Debug)]
pub(super) struct TokenLogprobs {
    /// How many alternatives each token lists.
    pub top: usize,
    /// Tokens the grammar forced, fed at the next decode, each with the mask it was forced under. The
    /// logits of the position before each one, computed by that decode, score it.
    pub awaiting: VecDeque<(u32, SimpleVob)>,
    unsent: VecDeque<Unsent>,
    /// The answer's bytes so far (every token's, as given to the text).
    pushed: usize,
    /// Released text not yet sent: a token under it waits for its logits.
    held: String,
}

impl TokenLogprobs {
    pub fn new(top: usize) -> Self {
        Self { top, awaiting: VecDeque::new(), unsent: VecDeque::new(), pushed: 0, held: String::new() }
    }

    /// A token of `len` bytes joins the answer; `entry` is `None` for a forced token, scored later.
    pub fn push(&mut self, len: usize, entry: Option<TokenLogprob>) {
        let start = self.pushed;
        self.pushed += len;
        self.unsent.push_back(Unsent { start, end: self.pushed, entry });
    }

    /// The entry of the earliest forced token still unscored. (A forced token after a stop sequence was
    /// never given to the text: its entry has no place and is dropped.)
    pub fn scored_forced(&mut self, entry: TokenLogprob) {
        if let Some(slot) = self.unsent.iter_mut().find(|u| u.entry.is_none()) {
            slot.entry = Some(entry);
        }
    }

    /// The text just released (the answer's bytes before `through` are out) and the entries of the tokens
    /// it completes; `None` while one of those waits for its logits (the text is then held).
    pub fn release(&mut self, text: String, through: usize) -> Option<(String, Vec<TokenLogprob>)> {
        self.held.push_str(&text);
        let complete = self.unsent.iter().take_while(|u| u.end <= through).count();
        if self.unsent.iter().take(complete).any(|u| u.entry.is_none()) {
            return None;
        }
        let entries: Vec<TokenLogprob> = self.unsent.drain(..complete).filter_map(|u| u.entry).collect();
        let text = std::mem::take(&mut self.held);
        (!text.is_empty() || !entries.is_empty()).then_some((text, entries))
    }

    /// The end of the answer: the rest of the text, and the entries of every token with a byte in the
    /// answer. `cut_at`: where a stop sequence began, in the answer's bytes (the tokens from there on
    /// are not part of it).
    pub fn finish(&mut self, rest: String, cut_at: Option<usize>) -> (String, Vec<TokenLogprob>) {
        self.held.push_str(&rest);
        let kept = |u: &Unsent| cut_at.is_none_or(|at| u.start < at);
        let entries = self.unsent.drain(..).filter(kept).filter_map(|u| u.entry).collect();
        (std::mem::take(&mut self.held), entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probabilities(scored: &Scored) -> f32 {
        scored.top.iter().map(|&(_, lp)| lp.exp()).sum()
    }

    #[test]
    fn scores_are_the_softmax_of_the_allowed_logits() {
        let logits = [1.0, 3.0, 2.0, f32::NEG_INFINITY];
        let all = score(&logits, &Allowed::All, 1, 4);
        let z = (1f32.exp() + 3f32.exp() + 2f32.exp()).ln();
        assert!((all.logprob - (3.0 - z)).abs() < 1e-5, "{all:?}");
        assert_eq!(all.top.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 2, 0], "best first; -inf is not a token");
        assert!((probabilities(&all) - 1.0).abs() < 1e-5);

        // The grammar allows 0 and 2: the distribution is renormalised over them.
        let listed = [true, false, true, false];
        let masked = score(&logits, &Allowed::Listed(&listed), 2, 20);
        let z = (1f32.exp() + 2f32.exp()).ln();
        assert!((masked.logprob - (2.0 - z)).abs() < 1e-5, "{masked:?}");
        assert_eq!(masked.top.iter().map(|t| t.0).collect::<Vec<_>>(), [2, 0], "only allowed tokens, fewer than asked");
        assert!((probabilities(&masked) - 1.0).abs() < 1e-5);

        let none = score(&logits, &Allowed::All, 0, 0);
        assert!(none.top.is_empty());
        assert!(score(&logits, &Allowed::Listed(&listed), 1, 1).logprob <= FLOOR, "a token the grammar forbids");
    }

    #[test]
    fn large_logits_do_not_overflow() {
        let logits = [1000.0, 999.0, -20000.0];
        let scored = score(&logits, &Allowed::All, 0, 3);
        assert!(scored.logprob.is_finite() && scored.logprob < 0.0);
        assert!((probabilities(&scored) - 1.0).abs() < 1e-5);
        assert_eq!(scored.top[2].1, FLOOR, "e^-21000 is floored at -9999, not -inf");
    }

    fn entry_of(text: &str) -> TokenLogprob {
        entry(text.as_bytes().to_vec(), Scored { logprob: -0.5, top: Vec::new() }, |_| Vec::new())
    }

    #[test]
    fn a_delta_waits_for_the_forced_tokens_under_it_and_a_stop_drops_what_follows() {
        let mut lp = TokenLogprobs::new(0);
        lp.push(2, Some(entry_of("ab")));
        lp.push(1, None);
        assert_eq!(lp.release("a".into(), 1), Some(("a".into(), Vec::new())), "no token complete yet: text alone");
        assert_eq!(lp.release("bc".into(), 3), None, "the forced `c` is not scored yet");
        lp.scored_forced(entry_of("c"));
        let (text, entries) = lp.release(String::new(), 3).unwrap();
        assert_eq!((text.as_str(), entries.len()), ("bc", 2));

        lp.push(3, Some(entry_of("d\nE")));
        lp.push(2, Some(entry_of("ND")));
        // The stop sequence `\nEND` began at byte 4: `d\nE` has a byte in the answer, `ND` has none.
        let (text, entries) = lp.finish("d".into(), Some(4));
        assert_eq!((text.as_str(), entries.iter().map(|e| e.token.as_str()).collect::<Vec<_>>()), ("d", vec!["d\nE"]));
    }

    #[test]
    fn a_split_character_is_lossy_in_token_and_exact_in_bytes() {
        let euro = "€".as_bytes();
        let first = entry(euro[..1].to_vec(), Scored { logprob: -0.1, top: vec![(7, -0.1)] }, |_| euro[..2].to_vec());
        assert_eq!(first.token, "\u{fffd}");
        assert_eq!(first.bytes.as_deref(), Some(&euro[..1]));
        assert_eq!(first.top_logprobs[0].bytes.as_deref(), Some(&euro[..2]));
    }
}
