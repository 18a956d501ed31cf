//! A way out of a string the grammar will not let close yet: the shortest walk the closing bonus can
//! steer when a `pattern` needs several more bytes before its end (`"1257"` under
//! `^[0-9]+-[0-9]+-[0-9]+$` needs `-0-0`; an `iglu:` URI in its vendor part needs `/n/f/1-0-0`).
//! Trying every one-byte token two steps ahead (`Sampler::sample_steered`) finds a tail of one byte;
//! a blind search over longer tails grows with the alphabet to the power of their length.
//!
//! The walk goes one byte at a time over the one-byte tokens, and at each step takes the first byte
//! (punctuation first, then digits and letters) after which the grammar allows a different set of next
//! bytes than before it: a byte that leaves the set as it was stays in the same part of the pattern
//! (another digit of a number), one that changes it moves on (the `-` that starts the next number). The
//! walk ends as soon as one of the bytes it may take lets the quote follow. Where no byte changes the
//! set (a `-` inside `[a-z]+(?:-+[a-z]+)*` allows what a letter does), the walk crosses on the first
//! punctuation byte and looks again from there. Each question to the grammar
//! is a trial it undoes, and the walk stops when the trials it was given run out, so a schema whose
//! string can never close this way costs a bounded number of trials, not a stalled batch.

/// The most bytes a tail may have.
pub(super) const MAX_TAIL: usize = 12;

/// A set of the alphabet's entries, by their position in it (at most 128).
type Set = u128;

/// The walk's questions to the grammar.
struct Walk<'a, V> {
    /// How many of the tokens, in order, the grammar would take from where the answer is.
    accepts: V,
    alphabet: &'a [u32],
    /// Trials left.
    trials: &'a mut usize,
}

impl<V: FnMut(&[u32]) -> usize> Walk<'_, V> {
    /// Whether the grammar takes all of `path` then `next`; `None` once the trials are spent.
    fn takes(&mut self, path: &mut Vec<u32>, next: u32) -> Option<bool> {
        *self.trials = self.trials.checked_sub(1)?;
        path.push(next);
        let taken = (self.accepts)(path) == path.len();
        path.pop();
        Some(taken)
    }

    /// The alphabet's entries the grammar takes after `path`.
    fn next_bytes(&mut self, path: &mut Vec<u32>) -> Option<Set> {
        let mut set = 0;
        for (i, &token) in self.alphabet.iter().enumerate() {
            if self.takes(path, token)? {
                set |= 1 << i;
            }
        }
        Some(set)
    }
}

fn members(set: Set) -> impl Iterator<Item = usize> {
    (0..128).filter(move |i| set & (1 << i) != 0)
}

/// The tokens of a tail of one-byte tokens from `alphabet` (at most [`MAX_TAIL`], in the alphabet's
/// order of preference, its first `punctuation` entries punctuation) after which the grammar takes
/// `quote`; `accepts(tokens)` says how many of `tokens` the grammar would take in a row from where the
/// answer is. `None` when the walk finds none or spends its `trials`.
pub(super) fn tail_to_quote(
    accepts: impl FnMut(&[u32]) -> usize,
    quote: u32,
    alphabet: &[u32],
    punctuation: usize,
    trials: &mut usize,
) -> Option<Vec<u32>> {
    let alphabet = &alphabet[..alphabet.len().min(128)];
    let mut walk = Walk { accepts, alphabet, trials };
    let mut path = Vec::with_capacity(MAX_TAIL + 1);
    let mut here = walk.next_bytes(&mut path)?;
    let mut crossed = false;
    while path.len() < MAX_TAIL {
        for i in members(here) {
            path.push(alphabet[i]);
            let closes = walk.takes(&mut path, quote)?;
            if closes {
                return Some(path);
            }
            path.pop();
        }
        let mut moved = None;
        for i in members(here) {
            path.push(alphabet[i]);
            let next = walk.next_bytes(&mut path)?;
            if next != 0 && next != here {
                moved = Some(next);
                break;
            }
            path.pop();
        }
        if moved.is_none() && !crossed {
            // No byte changes the set: a plateau (`[a-z]+(?:-+[a-z]+)*-v\d+` after a letter, where
            // a `-` allows what a letter does). Cross it on its first punctuation byte, a separator most
            // often, and look for a change from there; never twice in a row.
            if let Some(i) = members(here).find(|&i| i < punctuation) {
                path.push(alphabet[i]);
                crossed = true;
                continue;
            }
        }
        here = moved?;
        crossed = false;
    }
    None
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    use super::*;

    /// Token `i` of the alphabet is byte `ALPHABET[i]`; the quote is token 100.
    const ALPHABET: &[u8] = b"-./:_0123456789abcdefghijklmnopqrstuvwxyz";
    const QUOTE: u32 = 100;
    const PUNCTUATION: usize = 5;
    const THREE_NUMBERS: &str = "[0-9]+-[0-9]+-[0-9]+";
    const THREE_NUMBERS_SO_FAR: &str = "[0-9]+(-([0-9]+(-[0-9]*)?)?)?";

    fn alphabet() -> Vec<u32> {
        (0..u32::try_from(ALPHABET.len()).unwrap()).collect()
    }

    /// A grammar for a string whose text (after `written`) must match `pattern` before it closes, and
    /// whose text so far must match `prefix` (the pattern's prefixes, written out by hand): how many of
    /// the tokens it takes in a row.
    fn grammar(written: &str, pattern: &str, prefix: &str) -> impl FnMut(&[u32]) -> usize {
        let (full, prefix) = (Regex::new(&format!("^(?:{pattern})$")).unwrap(), Regex::new(&format!("^(?:{prefix})$")).unwrap());
        let written = written.to_owned();
        move |tokens: &[u32]| {
            let mut text = written.clone();
            for (n, &t) in tokens.iter().enumerate() {
                if t == QUOTE {
                    return if full.is_match(&text) { n + 1 } else { n };
                }
                text.push(char::from(ALPHABET[t as usize]));
                if !prefix.is_match(&text) {
                    return n;
                }
            }
            tokens.len()
        }
    }

    fn text(tokens: &[u32]) -> String {
        tokens.iter().map(|&t| char::from(ALPHABET[t as usize])).collect()
    }

    #[test]
    fn a_pattern_of_three_numbers_ends_after_two_more() {
        let mut trials = 10_000;
        let tail =
            tail_to_quote(grammar("1257", THREE_NUMBERS, THREE_NUMBERS_SO_FAR), QUOTE, &alphabet(), PUNCTUATION, &mut trials).unwrap();
        assert_eq!(text(&tail), "-0-0");
    }

    #[test]
    fn a_version_suffix_is_found_through_its_letter() {
        let mut trials = 10_000;
        let tail = tail_to_quote(grammar("model", "[a-z]+-v[0-9]+", "[a-z]+(-(v[0-9]*)?)?"), QUOTE, &alphabet(), PUNCTUATION, &mut trials)
            .unwrap();
        assert_eq!(text(&tail), "-v0");
    }

    #[test]
    fn a_separator_crosses_a_stretch_where_no_byte_changes_what_may_follow() {
        let mut trials = 10_000;
        let grammar = grammar("layout", "[a-z]+(-+[a-z]+)*-v[0-9]+", "[a-z][a-z-]*(-v[0-9]+)?");
        let tail = tail_to_quote(grammar, QUOTE, &alphabet(), PUNCTUATION, &mut trials).unwrap();
        assert_eq!(text(&tail), "-v0", "after a letter and after a `-` the same bytes may follow: the `-` crosses");
    }

    #[test]
    fn a_string_that_may_close_at_once_needs_one_byte_at_most() {
        let mut trials = 10_000;
        let tail = tail_to_quote(grammar("ab", "[a-z]+:", "[a-z]+:?"), QUOTE, &alphabet(), PUNCTUATION, &mut trials).unwrap();
        assert_eq!(text(&tail), ":");
    }

    #[test]
    fn the_walk_stops_when_its_trials_are_spent() {
        let mut trials = 30;
        assert_eq!(tail_to_quote(grammar("1257", THREE_NUMBERS, THREE_NUMBERS_SO_FAR), QUOTE, &alphabet(), PUNCTUATION, &mut trials), None);
        assert_eq!(trials, 0, "every trial spent, none more");
        let mut trials = 10_000;
        assert_eq!(
            tail_to_quote(grammar("x", "x(ab)+-z{14}", "x((ab)*a?|(ab)+-z{0,14})"), QUOTE, &alphabet(), PUNCTUATION, &mut trials),
            None,
            "no tail within MAX_TAIL"
        );
        assert!(trials > 0);
    }
}
