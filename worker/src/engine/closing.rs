//! Closing a JSON answer before `max_tokens` cuts it. A small model under a schema often never decides to
//! stop: it counts up inside a string (`"2021-2022-2023-…"`), keeps adding array items
//! (`"key1","key2",…`) or nests without end. The repetition guard (`repetition.rs`) cannot see those as
//! loops, because every token differs from the last. Cut at `max_tokens`, such an answer is invalid JSON
//! and useless to the caller.
//!
//! Two pressures, both only on logits before the grammar's mask (where the schema does not allow closing
//! yet, a `minLength`, a `pattern`, a required property, nothing changes):
//!
//! - **The budget.** Once the tokens left are about what it takes to close everything still open, the
//!   tokens that only close (a quote inside a string, then `]` and `}` in the order the open values
//!   need them, and nothing else: `"}` yes, `},{"` not, since it opens as much as it closes) get a large
//!   bonus, from then to the end of the answer.
//! - **A runaway word.** Inside a string, once a run of text without white space passes
//!   [`RUNAWAY_WORD`] bytes or [`RUNAWAY_TOKENS`] tokens, tokens starting with the closing quote get a
//!   bonus that grows with the run. Real values of that length are URLs, hashes and file paths, a few
//!   bytes to a token; what the embedded model writes there is a count (`"1257-1258-1259-…"`,
//!   `"hero1253.hero1254.…"`) or a letter chain (`"a-n-a-n-n-…"`) at a byte or two per token, which
//!   takes the budget the rest of the document needs.
//!
//! Where the grammar does not allow the quote yet (a `format: uri` still in its scheme, a `pattern`
//! whose tail has not come), the scheduler asks the grammar which of the best allowed tokens would let
//! the quote follow (`Sampler::sample_steered`), and those get the quote's bonus; when none does, the
//! answer is steered along a tail of several one-byte tokens that ends where the quote may follow
//! (`tail.rs`: `"1257"` under `^[0-9]+-[0-9]+-[0-9]+$` ends as `"1257-0-0"`).
//!
//! A closed answer is shorter than the model would have written, but it is complete and valid, where the
//! cut one was neither.

/// Logits added to a closing token once the answer must close: more than the gap between a small model's
/// likely tokens, so greedy decoding takes the closer whenever the grammar allows it.
pub(super) const CLOSING_BONUS: f32 = 12.0;

/// Tokens kept in hand beyond what closing needs (a key the grammar forces, a comma).
const SLACK: usize = 6;

/// The share of the budget kept for closing besides: what required properties still to come cost, which
/// the bytes so far cannot tell (1/8: 37 of 300 tokens).
const RESERVE_SHARE: usize = 8;

/// Bytes of a string's text without white space before the closing quote starts to be favoured.
pub(super) const RUNAWAY_WORD: usize = 48;

/// Bytes of a runaway word per logit of bonus for the closing quote (up to [`CLOSING_BONUS`]).
const RUNAWAY_BYTES_PER_LOGIT: usize = 2;

/// Tokens of a string's text without white space before the closing quote starts to be favoured, a
/// logit per token beyond (up to [`CLOSING_BONUS`]): a run of one-byte tokens costs the budget as
/// much as a word three times as long.
pub(super) const RUNAWAY_TOKENS: usize = 28;

/// Which tokens a JSON answer's closing favours, by their text; built once per model.
#[derive(Debug, Default)]
pub struct JsonTokens {
    /// The first byte of each token's text (white space skipped); `0` for tokens with no text.
    first: Vec<u8>,
    /// Tokens whose text is only closing bytes (at most one quote, first, then `]` and `}`) and white
    /// space, by id, with those bytes.
    closers: Vec<(u32, Box<[u8]>)>,
    /// The token whose text is a quote alone.
    quote: Option<u32>,
    /// Tokens whose text is one ASCII punctuation byte other than a quote or a backslash (`:`, `-`,
    /// `/`, …): what a `format` or a `pattern` often needs before a string may close, whether or not
    /// the model ranks them high.
    punctuation: Vec<u32>,
    /// Tokens of one printable ASCII byte other than a quote, a backslash or a space: the punctuation,
    /// then the digits, the small letters and the capitals. What a tail that lets a string close is
    /// walked over (`tail.rs`).
    alphabet: Vec<u32>,
}

impl JsonTokens {
    /// From every token's text, in id order.
    #[must_use]
    pub fn new(pieces: impl Iterator<Item = Vec<u8>>) -> Self {
        let mut tokens = Self::default();
        let (mut digits, mut small, mut capitals) = (Vec::new(), Vec::new(), Vec::new());
        for (id, piece) in pieces.enumerate() {
            let text: Vec<u8> = piece.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
            tokens.first.push(text.first().copied().unwrap_or(0));
            let closes = !text.is_empty() && text.iter().enumerate().all(|(i, &b)| matches!(b, b']' | b'}') || (b == b'"' && i == 0));
            let Ok(id) = u32::try_from(id) else { continue };
            match piece.as_slice() {
                [b'"'] => tokens.quote = Some(id),
                [b] if b.is_ascii_punctuation() && *b != b'\\' => tokens.punctuation.push(id),
                [b] if b.is_ascii_digit() => digits.push(id),
                [b] if b.is_ascii_lowercase() => small.push(id),
                [b] if b.is_ascii_uppercase() => capitals.push(id),
                _ => {}
            }
            if closes {
                tokens.closers.push((id, text.into()));
            }
        }
        tokens.alphabet = [tokens.punctuation.as_slice(), &digits, &small, &capitals].concat();
        tokens
    }

    /// The token whose text is a quote alone, if the vocabulary has one.
    pub fn quote(&self) -> Option<u32> {
        self.quote
    }

    /// The tokens of one punctuation byte (see the field).
    pub fn punctuation(&self) -> &[u32] {
        &self.punctuation
    }

    /// The tokens of one byte a tail is walked over, in order of preference (see the field).
    pub fn alphabet(&self) -> &[u32] {
        &self.alphabet
    }
}

/// Logits to add to some tokens at one step.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Bonus {
    None,
    /// To these tokens, sorted by id.
    Tokens(Vec<u32>, f32),
    /// To every token whose text starts with this byte.
    FirstByte(u8, f32),
}

impl Bonus {
    /// The bonus of token `id`.
    pub fn of(&self, id: usize, tokens: &JsonTokens) -> f32 {
        match self {
            Self::None => 0.0,
            Self::Tokens(ids, bonus) => match u32::try_from(id) {
                Ok(id) if ids.binary_search(&id).is_ok() => *bonus,
                _ => 0.0,
            },
            Self::FirstByte(byte, bonus) if tokens.first.get(id) == Some(byte) => *bonus,
            Self::FirstByte(..) => 0.0,
        }
    }

    /// The logits it adds to the tokens it favours.
    pub fn strength(&self) -> f32 {
        match self {
            Self::None => 0.0,
            Self::Tokens(_, bonus) | Self::FirstByte(_, bonus) => *bonus,
        }
    }
}

/// Where an answer is in the JSON it writes, from its bytes.
#[derive(Debug, Default, Clone)]
pub(super) struct JsonDepth {
    /// Open objects and arrays, innermost last (`{` or `[`).
    open: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// Bytes of the open string since its start or its last white space.
    run: usize,
    /// Tokens that wrote those bytes.
    run_tokens: usize,
    /// Set once the answer had to start closing: it closes from then on.
    closing: bool,
}

impl JsonDepth {
    /// Follows the answer's next token, by its bytes.
    pub fn push(&mut self, piece: &[u8]) {
        let run_before = self.run;
        for &b in piece {
            if self.in_string {
                match b {
                    _ if self.escaped => {
                        self.escaped = false;
                        self.run += 1;
                    }
                    b'\\' => {
                        self.escaped = true;
                        self.run += 1;
                    }
                    b'"' => self.in_string = false,
                    _ if b.is_ascii_whitespace() => self.run = 0,
                    _ => self.run += 1,
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    self.run = 0;
                }
                b'{' | b'[' => self.open.push(b),
                b'}' | b']' => {
                    self.open.pop();
                }
                _ => {}
            }
        }
        if self.run == 0 {
            self.run_tokens = 0;
        } else if self.run > run_before {
            self.run_tokens += 1;
        } else {
            // White space, then text, within one token.
            self.run_tokens = 1;
        }
    }

    /// Whether the answer is inside a string.
    pub fn in_string(&self) -> bool {
        self.in_string
    }

    /// What closes everything open, innermost first.
    fn closing_sequence(&self) -> Vec<u8> {
        let quote = self.in_string.then_some(b'"');
        quote.into_iter().chain(self.open.iter().rev().map(|&b| if b == b'{' { b'}' } else { b']' })).collect()
    }

    /// The bonus for the next token, `produced` tokens of the answer's `budget` written.
    pub fn bonus(&mut self, produced: usize, budget: usize, tokens: &JsonTokens) -> Bonus {
        let left = budget.saturating_sub(produced);
        // A quote and a bracket per open value, about.
        let needed = 2 * (self.open.len() + usize::from(self.in_string)) + SLACK + budget / RESERVE_SHARE;
        self.closing |= left <= needed && (self.in_string || !self.open.is_empty());
        if self.closing {
            let wanted = self.closing_sequence();
            let ids: Vec<u32> = tokens.closers.iter().filter(|(_, text)| wanted.starts_with(text)).map(|&(id, _)| id).collect();
            return if ids.is_empty() { Bonus::None } else { Bonus::Tokens(ids, CLOSING_BONUS) };
        }
        let by_bytes = self.run.saturating_sub(RUNAWAY_WORD) / RUNAWAY_BYTES_PER_LOGIT;
        let by_tokens = self.run_tokens.saturating_sub(RUNAWAY_TOKENS);
        let steps = u16::try_from(by_bytes.max(by_tokens)).unwrap_or(u16::MAX);
        if self.in_string && steps > 0 {
            return Bonus::FirstByte(b'"', f32::from(steps).min(CLOSING_BONUS));
        }
        Bonus::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(text: &str) -> JsonDepth {
        let mut d = JsonDepth::default();
        d.push(text.as_bytes());
        d
    }

    /// Token ids: 0 `"`, 1 `]`, 2 `}`, 3 `"}`, 4 `},{"`, 5 `"]}`, 6 ` }`, 7 `x`, 8 `","`, 9 `"]`.
    fn tokens() -> JsonTokens {
        let pieces = ["\"", "]", "}", "\"}", "},{\"", "\"]}", " }", "x", "\",\"", "\"]"];
        JsonTokens::new(pieces.iter().map(|p| p.as_bytes().to_vec()))
    }

    /// The tokens favoured with no budget left.
    fn favoured(text: &str) -> Vec<u32> {
        match depth(text).bonus(0, 0, &tokens()) {
            Bonus::Tokens(ids, _) => ids,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn only_tokens_that_close_what_is_open_in_order_are_favoured() {
        assert_eq!(favoured(r#"{"a":"20"#), vec![0, 3], "in a string in an object: the quote, or the quote and the brace");
        assert_eq!(favoured(r#"{"a":[1,2"#), vec![1], "in an array: `]`");
        assert_eq!(favoured(r#"{"a":[1,2],"b":{"c":1"#), vec![2, 6], "in an object: `}}`, spaces skipped");
        assert_eq!(favoured(r#"{"a":["x"#), vec![0, 5, 9], "a quote, then `]`, then `}}`");
        assert_eq!(favoured(r#"[{"a":"x"#), vec![0, 3], "`\"]` would close the array before the object");
        assert_eq!(favoured(r#"{"a":"x\"y"#), vec![0, 3], "an escaped quote does not close the string");
        assert_eq!(favoured(r#"{"a":"[{"#), vec![0, 3], "brackets inside a string are text");
        assert_eq!(depth(r#"{"a":1}"#).bonus(0, 0, &tokens()), Bonus::None, "nothing open: nothing to close");
    }

    #[test]
    fn closing_starts_when_the_budget_is_what_closing_needs_and_then_stays_on() {
        let mut d = depth(r#"{"a":[["#);
        // Three open values: 2·3 + slack + 80/8 = 22 tokens.
        assert_eq!(d.bonus(57, 80, &tokens()), Bonus::None);
        assert_eq!(d.bonus(58, 80, &tokens()), Bonus::Tokens(vec![1], CLOSING_BONUS));
        d.push(b"]");
        assert_eq!(d.bonus(0, 80, &tokens()), Bonus::Tokens(vec![1], CLOSING_BONUS), "once closing, it goes on closing");
    }

    #[test]
    fn a_runaway_word_favours_the_closing_quote_more_the_longer_it_runs() {
        let word = "x".repeat(RUNAWAY_WORD + 1);
        assert_eq!(depth(&format!(r#"{{"a":"{word}"#)).bonus(0, 300, &tokens()), Bonus::None, "one byte over: no logit yet");
        let long = "1257-".repeat(12);
        assert_eq!(depth(&format!(r#"{{"a":"{long}"#)).bonus(0, 300, &tokens()), Bonus::FirstByte(b'"', 6.0), "60 bytes: 12 over");
        let longer = "1257-".repeat(60);
        assert_eq!(depth(&format!(r#"{{"a":"{longer}"#)).bonus(0, 300, &tokens()), Bonus::FirstByte(b'"', CLOSING_BONUS));
        let prose = "a word ".repeat(60);
        assert_eq!(depth(&format!(r#"{{"a":"{prose}"#)).bonus(0, 300, &tokens()), Bonus::None, "white space starts the run again");
        assert_eq!(depth(&format!(r#"{{"a":"{long}","b":1"#)).bonus(0, 300, &tokens()), Bonus::None, "outside a string");
        assert_eq!(depth(&format!(r#"{{"a":"{long}","b":"x"#)).bonus(0, 300, &tokens()), Bonus::None, "a new string starts a new run");
    }

    #[test]
    fn a_run_of_short_tokens_counts_by_tokens() {
        let mut d = depth(r#"{"a":""#);
        for _ in 0..RUNAWAY_TOKENS {
            d.push(b"n");
        }
        assert_eq!(d.bonus(0, 300, &tokens()), Bonus::None, "{RUNAWAY_TOKENS} tokens of a byte: not yet");
        d.push(b"n");
        d.push(b"n");
        assert_eq!(d.bonus(0, 300, &tokens()), Bonus::FirstByte(b'"', 2.0), "two tokens over, though 30 bytes are far from a runaway word");
        d.push(b"a b");
        assert_eq!(d.run_tokens, 1, "white space inside a token starts the count again with the text after it");
        d.push(b" ");
        assert_eq!(d.bonus(0, 300, &tokens()), Bonus::None);
    }

    #[test]
    fn token_texts_are_read_once() {
        let t = tokens();
        assert_eq!(t.first, b"\"]}\"}\"}x\"\"".to_vec());
        let closers: Vec<u32> = t.closers.iter().map(|&(id, _)| id).collect();
        assert_eq!(closers, vec![0, 1, 2, 3, 5, 6, 9], "`}},{{\"` opens what it closes, `\",\"` goes on");
        assert_eq!(t.quote(), Some(0));
        assert_eq!(t.punctuation(), &[1, 2], "`]` and `}}`: one byte each");
        let more = JsonTokens::new([":", "\\", "\"", "ab", "-", " :"].iter().map(|p| p.as_bytes().to_vec()));
        assert_eq!(more.punctuation(), &[0, 4], "not a backslash, a quote, letters or a spaced colon");
        assert_eq!(more.quote(), Some(2));
        let mixed = JsonTokens::new(["a", "7", "Z", "-", "ab", " ", "\"", "/"].iter().map(|p| p.as_bytes().to_vec()));
        assert_eq!(mixed.alphabet(), &[3, 7, 1, 0, 2], "punctuation, digits, small letters, capitals; one byte each, no quote or space");
        assert_eq!(Bonus::FirstByte(b'"', 2.0).of(8, &t), 2.0);
        assert_eq!(Bonus::Tokens(vec![1, 3], 12.0).of(3, &t), 12.0);
        assert_eq!(Bonus::Tokens(vec![1, 3], 12.0).of(2, &t), 0.0);
    }
}
