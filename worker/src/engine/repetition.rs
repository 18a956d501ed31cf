//! Penalties on repeating what the answer already said: OpenAI's `frequency_penalty` and
//! `presence_penalty`, and a DRY ("don't repeat yourself") guard against loops.
//!
//! Small models under a grammar loop inside the freedom the grammar leaves them
//! (`"ListenerListenerListener…"`, `"…+00:00:00+00:00…"`) until `max_tokens` cuts the answer. DRY
//! penalises the token that would extend a run of tokens the answer already contains, more the longer
//! the run, so the model leaves the loop (closes the string, the array) instead. A penalty only moves
//! logits: the grammar's mask is applied after it, so what is allowed never changes, only what is chosen.
//!
//! Only the answer's own tokens count, not the prompt's: an extraction copies its document, and must not
//! be pushed away from the words it is asked to copy.

use std::collections::HashMap;

/// What the answer's history costs a token. All zero (the default): no penalty.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Penalties {
    /// Subtracted from a token's logit once per time the answer used it (OpenAI, −2…2).
    pub frequency: f32,
    /// Subtracted from a token's logit once the answer used it at all (OpenAI, −2…2).
    pub presence: f32,
    pub dry: Option<Dry>,
}

/// A DRY repetition guard (llama.cpp's `dry_*` parameters): a token that would extend a repeat of `n`
/// tokens, `n ≥ allowed_length`, loses `multiplier · base^(n − allowed_length)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dry {
    pub multiplier: f32,
    pub base: f32,
    pub allowed_length: usize,
}

impl Dry {
    /// What constrained (JSON) requests get unless they say otherwise: llama.cpp's recommended values.
    pub const CONSTRAINED_DEFAULT: Dry = Dry { multiplier: 0.8, base: 1.75, allowed_length: 2 };
}

impl Penalties {
    #[must_use]
    pub fn is_off(&self) -> bool {
        self.frequency == 0.0 && self.presence == 0.0 && self.dry.is_none_or(|d| d.multiplier == 0.0)
    }
}

/// Bytes that end a run DRY may match across: a repeat never spans a JSON string boundary or a line, so
/// key names and structure that every array item repeats are not penalised, while a loop inside a value
/// (a string, a run of digits and separators) is.
const BREAKERS: [u8; 2] = [b'"', b'\n'];
/// How far back DRY looks for an earlier occurrence, and the longest repeat it measures: bounds each
/// step's work, and past this length the penalty already excludes the token.
const DRY_WINDOW: usize = 1024;
const DRY_MAX_REPEAT: usize = 48;

/// The answer's tokens so far, as the penalties need them.
#[derive(Debug, Default)]
pub struct History {
    tokens: Vec<u32>,
    /// Where in `tokens` the last token whose text holds a breaker byte is.
    last_breaker: Option<usize>,
    counts: HashMap<u32, u32>,
}

impl History {
    /// Records an answer token and its text.
    pub fn push(&mut self, token: u32, piece: &[u8]) {
        if piece.iter().any(|b| BREAKERS.contains(b)) {
            self.last_breaker = Some(self.tokens.len());
        }
        self.tokens.push(token);
        *self.counts.entry(token).or_insert(0) += 1;
    }

    /// What each penalised token loses, sorted by token id; empty when nothing is penalised.
    #[must_use]
    pub fn adjustments(&self, penalties: &Penalties) -> Vec<(u32, f32)> {
        let mut out: HashMap<u32, f32> = HashMap::new();
        if penalties.frequency != 0.0 || penalties.presence != 0.0 {
            for (&token, &count) in &self.counts {
                let count = count as f32;
                out.insert(token, penalties.frequency * count + penalties.presence);
            }
        }
        if let Some(dry) = penalties.dry.filter(|d| d.multiplier > 0.0) {
            for (token, penalty) in self.dry(dry) {
                *out.entry(token).or_insert(0.0) += penalty;
            }
        }
        let mut out: Vec<(u32, f32)> = out.into_iter().collect();
        out.sort_unstable_by_key(|&(token, _)| token);
        out
    }

    /// For each token that would extend a repeat of at least `allowed_length` tokens, its penalty.
    fn dry(&self, dry: Dry) -> HashMap<u32, f32> {
        let mut longest: HashMap<u32, usize> = HashMap::new();
        let n = self.tokens.len();
        // The run that may repeat: the tokens since the last breaker.
        let tail = self.last_breaker.map_or(n, |at| n - at - 1).min(DRY_MAX_REPEAT);
        if tail < dry.allowed_length.max(1) {
            return HashMap::new();
        }
        let h = &self.tokens;
        for j in n.saturating_sub(DRY_WINDOW)..n {
            // How many tokens before position j equal the answer's last tokens.
            let repeat = (0..tail.min(j)).take_while(|&i| h[j - 1 - i] == h[n - 1 - i]).count();
            if repeat >= dry.allowed_length {
                let best = longest.entry(h[j]).or_insert(0);
                *best = (*best).max(repeat);
            }
        }
        longest
            .into_iter()
            .map(|(token, repeat)| {
                let exponent = i32::try_from(repeat - dry.allowed_length).unwrap_or(i32::MAX);
                (token, dry.multiplier * dry.base.powi(exponent))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(tokens: &[u32]) -> History {
        let mut h = History::default();
        for &t in tokens {
            // Token 0 stands for a quote.
            h.push(t, if t == 0 { b"\"" } else { b"x" });
        }
        h
    }

    const DRY: Penalties = Penalties { frequency: 0.0, presence: 0.0, dry: Some(Dry::CONSTRAINED_DEFAULT) };

    #[test]
    fn frequency_and_presence_follow_openai() {
        let h = history(&[5, 5, 7]);
        let p = Penalties { frequency: 0.5, presence: 1.0, dry: None };
        assert_eq!(h.adjustments(&p), vec![(5, 2.0), (7, 1.5)]);
        assert!(h.adjustments(&Penalties::default()).is_empty());
    }

    #[test]
    fn dry_penalises_the_token_that_extends_a_loop_more_the_longer_it_is() {
        // 1 2 3 1 2 | next: 3 would repeat "1 2 3".
        assert_eq!(history(&[1, 2, 3, 1, 2]).adjustments(&DRY), vec![(3, 0.8)]);
        // 1 2 3 1 2 3 1 2: the repeat before 3 is now 5 tokens long.
        let longer = history(&[1, 2, 3, 1, 2, 3, 1, 2]).adjustments(&DRY);
        let three = longer.iter().find(|(t, _)| *t == 3).map(|&(_, p)| p).unwrap_or_default();
        assert!((three - 0.8 * 1.75f32.powi(3)).abs() < 1e-4, "{longer:?}");
        // A one-token repeat is allowed.
        assert!(history(&[1, 2, 1]).adjustments(&DRY).is_empty());
    }

    #[test]
    fn dry_does_not_reach_across_a_string_boundary() {
        // "1 2" then a quote: the run after the breaker is too short to repeat anything.
        assert!(history(&[1, 2, 3, 1, 2, 0]).adjustments(&DRY).is_empty());
        // The run after the quote may repeat one from before it (an earlier value written again).
        assert_eq!(history(&[1, 2, 3, 0, 1, 2]).adjustments(&DRY), vec![(3, 0.8)]);
        let inside = history(&[0, 4, 5, 6, 4, 5]).adjustments(&DRY);
        assert_eq!(inside, vec![(6, 0.8)]);
    }

    #[test]
    fn long_loops_stay_finite() {
        let tokens: Vec<u32> = (0..2000).map(|i| 1 + i % 3).collect();
        let adjustments = history(&tokens).adjustments(&DRY);
        assert!(!adjustments.is_empty());
        assert!(adjustments.iter().all(|(_, p)| p.is_finite()));
    }
}
