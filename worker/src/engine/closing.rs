//! Closing a JSON answer before `max_tokens` cuts it. A small model under a schema often never decides to
//! stop: it counts up inside a string (`"2021-2022-2023-…"`), keeps adding array items
//! (`"key1","key2",…`) or nests without end. The repetition guard (`repetition.rs`) cannot see those as
//! loops, because every token differs from the last. Cut at `max_tokens`, such an answer is invalid JSON
//! and useless to the caller.
//!
//! So once the tokens left are about what it takes to close everything still open, the tokens that close
//! the innermost open value (a quote inside a string, `]` in an array, `}` in an object) get a large
//! bonus, from then to the end of the answer. Like every penalty this only moves logits before the
//! grammar's mask: where the schema does not allow closing yet (a `minLength`, a required property),
//! nothing changes. A closed answer is shorter than the model would have written, but it is complete and
//! valid, where the cut one was neither.

/// Logits added to a closing token once the answer must close: more than the gap between a small model's
/// likely tokens, so greedy decoding takes the closer whenever the grammar allows it.
pub(super) const CLOSING_BONUS: f32 = 12.0;

/// Tokens kept in hand beyond what closing needs (a key the grammar forces, a comma).
const SLACK: usize = 6;

/// Where an answer is in the JSON it writes, from its bytes.
#[derive(Debug, Default, Clone)]
pub(super) struct JsonDepth {
    /// Open objects and arrays, innermost last (`{` or `[`).
    open: Vec<u8>,
    in_string: bool,
    escaped: bool,
    /// Set once the answer had to start closing: it closes from then on.
    closing: bool,
}

impl JsonDepth {
    /// Follows the answer's next bytes.
    pub fn push(&mut self, piece: &[u8]) {
        for &b in piece {
            if self.in_string {
                match b {
                    _ if self.escaped => self.escaped = false,
                    b'\\' => self.escaped = true,
                    b'"' => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.open.push(b),
                b'}' | b']' => {
                    self.open.pop();
                }
                _ => {}
            }
        }
    }

    /// The byte a token must start with to close the innermost open value, when the answer must close
    /// now: `left` tokens remain of its budget.
    pub fn closer(&mut self, left: usize) -> Option<u8> {
        // A quote and a bracket per open value, about.
        let needed = 2 * (self.open.len() + usize::from(self.in_string)) + SLACK;
        self.closing |= left <= needed && (self.in_string || !self.open.is_empty());
        if !self.closing {
            return None;
        }
        if self.in_string {
            return Some(b'"');
        }
        match self.open.last() {
            Some(b'{') => Some(b'}'),
            Some(_) => Some(b']'),
            None => None,
        }
    }
}

/// The first byte of each token's text, for the closers; `0` for tokens with no text.
#[must_use]
pub fn first_bytes(pieces: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    pieces.map(|p| p.iter().copied().find(|b| !b.is_ascii_whitespace()).unwrap_or(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(text: &str) -> JsonDepth {
        let mut d = JsonDepth::default();
        d.push(text.as_bytes());
        d
    }

    #[test]
    fn the_innermost_open_value_decides_the_closer() {
        assert_eq!(depth(r#"{"a":"20"#).closer(0), Some(b'"'));
        assert_eq!(depth(r#"{"a":[1,2"#).closer(0), Some(b']'));
        assert_eq!(depth(r#"{"a":[1,2],"b":{"c":1"#).closer(0), Some(b'}'));
        assert_eq!(depth(r#"{"a":"x\"y"#).closer(0), Some(b'"'), "an escaped quote does not close the string");
        assert_eq!(depth(r#"{"a":"[{"#).closer(0), Some(b'"'), "brackets inside a string are text");
        assert_eq!(depth(r#"{"a":1}"#).closer(0), None, "nothing open: nothing to close");
    }

    #[test]
    fn closing_starts_when_the_budget_is_what_closing_needs_and_then_stays_on() {
        let mut d = depth(r#"{"a":[["#);
        // Three open values: 2·3 + slack.
        assert_eq!(d.closer(13), None);
        assert_eq!(d.closer(12), Some(b']'));
        d.push(b"]");
        assert_eq!(d.closer(100), Some(b']'), "once closing, it goes on closing");
    }

    #[test]
    fn first_bytes_skip_leading_spaces() {
        let pieces = vec![b" \"}".to_vec(), b"]".to_vec(), Vec::new(), b"ab".to_vec()];
        assert_eq!(first_bytes(pieces.into_iter()), vec![b'"', b']', 0, b'a']);
    }
}
