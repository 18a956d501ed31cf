//! Prompt-lookup drafts: an answer that copies from its prompt (an extraction's `"A-1024"`, a date, a
//! name) or repeats itself (the keys of an array's objects) can be guessed a few tokens ahead from the
//! tokens it already holds. The scheduler feeds the guess after the sampled token in the same decode,
//! each guessed token with its own logits, and keeps the longest prefix that sampling at those logits
//! chooses anyway (`Scheduler::take_draft`): a guessed token is kept only when the sampler, with the
//! grammar's mask, the penalties and the seed's next draw, picks exactly it. So drafts never choose a
//! token, and a sampled answer keeps its distribution (a deterministic draft accepted when a draw from the
//! model equals it is the standard acceptance rule). The guessed rows are computed in a larger batch,
//! whose rounding in llama.cpp can tip a near tie, as other requests sharing the batch can
//! (`docs/worker.md`, "Prompt-lookup drafts").
//!
//! Guesses cost decode time on a CPU (a step's time grows with its tokens), so a sequence's draft length
//! follows how much of its last draft was kept ([`DraftLength`]).

/// The longest and shortest run of last tokens looked up (longest first: a longer match guesses better).
const LONGEST_KEY: usize = 4;
const SHORTEST_KEY: usize = 3;

/// The tokens that followed the most recent earlier occurrence of `history`'s last few tokens, at most
/// `max` of them; empty when those tokens occur nowhere earlier. The key is the last 4 tokens, else the
/// last 3.
pub(super) fn lookup<T: PartialEq>(history: &[T], max: usize) -> &[T] {
    if max == 0 {
        return &[];
    }
    for n in (SHORTEST_KEY..=LONGEST_KEY).rev() {
        let Some(key_at) = history.len().checked_sub(n) else { continue };
        let key = &history[key_at..];
        // Most recent first: the nearest repetition is the likeliest to continue the same way.
        let found = (0..key_at).rev().find(|&start| &history[start..start + n] == key);
        if let Some(start) = found {
            let from = start + n;
            return &history[from..history.len().min(from + max)];
        }
    }
    &[]
}

/// How many tokens a sequence guesses next: doubled (up to the limit) after a draft kept whole, what was
/// kept after a draft cut short, and none for the next few steps after a draft of which nothing was kept.
#[derive(Debug, Clone, Copy)]
pub(super) struct DraftLength {
    limit: usize,
    next: usize,
    /// Steps left without drafts.
    resting: usize,
}

/// Steps a sequence takes without drafts after one of which nothing was kept.
const REST: usize = 4;

impl DraftLength {
    /// `limit` 0: no drafts.
    pub fn new(limit: usize) -> Self {
        Self { limit, next: limit.min(2), resting: 0 }
    }

    /// The most tokens to guess at this step (0 while resting), counting the step.
    pub fn take(&mut self) -> usize {
        if self.resting > 0 {
            self.resting -= 1;
            return 0;
        }
        self.next
    }

    /// A draft of `proposed` tokens of which the first `kept` joined the answer.
    pub fn kept(&mut self, proposed: usize, kept: usize) {
        if kept == 0 {
            self.resting = REST;
        }
        self.next = if kept >= proposed { (self.next * 2).min(self.limit) } else { kept.clamp(1, self.limit) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_key_that_occurred_before_gives_what_followed_its_latest_occurrence() {
        // The last 4 tokens (3 7 8 9) occurred at 0; the last 3 (7 8 9) more recently, at 7.
        let history = [3, 7, 8, 9, 20, 21, 4, 7, 8, 9, 30, 3, 7, 8, 9];
        assert_eq!(lookup(&history, 2), &[20, 21], "the longer key guesses better");
        let history = [1, 2, 7, 8, 9, 4, 5, 6, 3, 7, 8, 9, 10, 11, 0, 7, 8, 9];
        assert_eq!(lookup(&history, 2), &[10, 11], "the latest of the earlier occurrences, at 9");
        assert_eq!(lookup(&history, 10), &[10, 11, 0, 7, 8, 9], "up to the end of the history");
    }

    #[test]
    fn a_shorter_key_serves_when_the_longer_occurred_nowhere_before() {
        let history = [6, 8, 9, 4, 4, 1, 6, 8, 9];
        assert_eq!(lookup(&history, 3), &[4, 4, 1]);
    }

    #[test]
    fn nothing_is_guessed_from_a_repeated_pair_or_an_unseen_key() {
        assert!(lookup(&[1, 2, 3, 4, 2, 3], 4).is_empty(), "a key of two tokens is too weak to guess from");
        assert!(lookup(&[1, 2, 3, 4], 4).is_empty());
        assert!(lookup::<u32>(&[], 4).is_empty());
        assert!(lookup(&[1, 2, 3, 1, 2, 3], 0).is_empty(), "a limit of 0 guesses nothing");
    }

    #[test]
    fn the_draft_length_grows_while_drafts_are_kept_falls_to_what_was_kept_and_rests_after_a_miss() {
        let mut length = DraftLength::new(12);
        assert_eq!(length.take(), 2);
        length.kept(2, 2);
        assert_eq!(length.take(), 4);
        length.kept(4, 4);
        length.kept(8, 8);
        assert_eq!(length.take(), 12, "never past the limit");
        length.kept(12, 2);
        assert_eq!(length.take(), 2);
        length.kept(2, 0);
        assert_eq!([length.take(), length.take(), length.take(), length.take()], [0; 4], "resting");
        assert_eq!(length.take(), 1);
        assert_eq!(DraftLength::new(0).take(), 0, "limit 0: off");
    }
}
