//! Prompt-lookup drafts: an answer that copies from its prompt (an extraction's `"A-1024"`, a date, a
//! name) or repeats itself (the keys of an array's objects) can be guessed a few tokens ahead from the
//! tokens it already holds. The scheduler feeds the guess after the sampled token in the same decode,
//! each guessed token with its own logits, and keeps the longest prefix that sampling at those logits
//! chooses anyway (`Scheduler::take_draft`): a guessed token is kept only when the sampler, with the
//! grammar's mask, the penalties and the seed's next draw, picks exactly it. So an answer is the one
//! decoding without drafts gives, token for token, and a sampled answer keeps its distribution (a
//! deterministic draft accepted when a draw from the model equals it is the standard acceptance rule).
//!
//! Guesses cost decode time on a CPU (a step's time grows with its tokens), so a sequence's draft length
//! follows how much of its last draft was kept ([`DraftLength`]).

/// The longest and shortest run of last tokens looked up (longest first: a longer match guesses better).
const LONGEST_KEY: usize = 3;
const SHORTEST_KEY: usize = 2;

/// The tokens that followed the most recent earlier occurrence of `history`'s last few tokens, at most
/// `max` of them; empty when those tokens occur nowhere earlier. The key is the last 3 tokens, else the
/// last 2.
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

/// How many tokens a sequence guesses next: doubled (up to the limit) after a draft kept whole, one more
/// than was kept after a draft cut short.
#[derive(Debug, Clone, Copy)]
pub(super) struct DraftLength {
    limit: usize,
    next: usize,
}

impl DraftLength {
    /// `limit` 0: no drafts.
    pub fn new(limit: usize) -> Self {
        Self { limit, next: limit.min(4) }
    }

    pub fn next(self) -> usize {
        self.next
    }

    /// A draft of `proposed` tokens of which the first `kept` joined the answer.
    pub fn kept(&mut self, proposed: usize, kept: usize) {
        self.next = if kept >= proposed { (self.next * 2).min(self.limit) } else { (kept + 1).min(self.limit) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_key_that_occurs_earlier_gives_what_followed_its_latest_occurrence() {
        // The key 7 8 9 ends the history and occurred before at 2 and at 9.
        let history = [1, 2, 7, 8, 9, 4, 5, 6, 3, 7, 8, 9, 10, 11, 0, 7, 8, 9];
        assert_eq!(lookup(&history, 2), &[10, 11], "the latest earlier occurrence, at 9");
        assert_eq!(lookup(&history, 10), &[10, 11, 0, 7, 8, 9], "up to the end of the history");
    }

    #[test]
    fn a_shorter_key_serves_when_the_longer_occurs_nowhere_earlier() {
        let history = [5, 8, 9, 4, 4, 1, 8, 9];
        // 1 8 9 never occurred before; 8 9 did, followed by 4 4.
        assert_eq!(lookup(&history, 3), &[4, 4, 1]);
    }

    #[test]
    fn nothing_is_guessed_from_a_single_repeated_token_or_an_unseen_pair() {
        assert!(lookup(&[1, 2, 3, 4, 3], 4).is_empty(), "a key of one token is too weak to guess from");
        assert!(lookup(&[1, 2, 3, 4], 4).is_empty());
        assert!(lookup::<u32>(&[], 4).is_empty());
        assert!(lookup(&[1, 2, 1, 2], 0).is_empty(), "a limit of 0 guesses nothing");
    }

    #[test]
    fn the_draft_length_grows_while_drafts_are_kept_and_falls_to_what_was_kept() {
        let mut length = DraftLength::new(12);
        assert_eq!(length.next(), 4);
        length.kept(4, 4);
        assert_eq!(length.next(), 8);
        length.kept(8, 8);
        assert_eq!(length.next(), 12, "never past the limit");
        length.kept(12, 2);
        assert_eq!(length.next(), 3);
        length.kept(3, 0);
        assert_eq!(length.next(), 1);
        assert_eq!(DraftLength::new(0).next(), 0, "limit 0: off");
    }
}
