//! Turning token bytes into text deltas: UTF-8 reassembly across tokens and stop sequences.

/// Accumulates token bytes and releases text once it is valid UTF-8 and cannot be the start of a stop
/// sequence.
#[derive(Debug, Default)]
pub struct TextAssembler {
    pending_bytes: Vec<u8>,
    held: String,
    stops: Vec<String>,
    matched: Option<String>,
    /// Bytes pushed so far.
    pushed: usize,
    /// The answer's bytes released so far (where a stop sequence began, once one did): what the tokens'
    /// log probabilities are matched against (`logprobs.rs`). Counted in the text's bytes, which are the
    /// tokens' bytes wherever those are valid UTF-8.
    through: usize,
}

/// What one step released.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Released {
    pub text: String,
    /// A stop sequence was seen: `text` ends right before it and generation must end.
    pub stopped: bool,
}

impl TextAssembler {
    /// The stop sequence that ended the text, once one has.
    #[must_use]
    pub fn matched_stop(&self) -> Option<&str> {
        self.matched.as_deref()
    }

    /// How many of the answer's bytes are released; once a stop sequence matched, where it began.
    #[must_use]
    pub fn through(&self) -> usize {
        self.through
    }

    #[must_use]
    pub fn new(stops: Vec<String>) -> Self {
        Self { stops: stops.into_iter().filter(|s| !s.is_empty()).collect(), ..Self::default() }
    }

    pub fn push(&mut self, bytes: &[u8]) -> Released {
        self.pushed += bytes.len();
        self.pending_bytes.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending_bytes) {
            Ok(_) => self.pending_bytes.len(),
            // An incomplete character at the end waits for the next token.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            // Bytes that can never become UTF-8 are replaced, as every other decoder does.
            Err(_) => {
                let lossy = String::from_utf8_lossy(&self.pending_bytes).into_owned();
                self.pending_bytes.clear();
                self.held.push_str(&lossy);
                return self.release();
            }
        };
        let complete: Vec<u8> = self.pending_bytes.drain(..valid).collect();
        self.held.push_str(&String::from_utf8_lossy(&complete));
        self.release()
    }

    /// Everything still held, at the end of generation. Nothing after a stop sequence.
    pub fn finish(&mut self) -> String {
        if self.matched.is_some() {
            return String::new();
        }
        self.through = self.pushed;
        let mut rest = std::mem::take(&mut self.held);
        if !self.pending_bytes.is_empty() {
            rest.push_str(&String::from_utf8_lossy(&self.pending_bytes));
            self.pending_bytes.clear();
        }
        rest
    }

    fn release(&mut self) -> Released {
        let first_stop = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min();
        if let Some(at) = first_stop {
            self.matched = self.stops.iter().find(|s| self.held[at..].starts_with(s.as_str())).cloned();
            let text = self.held[..at].to_owned();
            self.through = self.unreleased_from() + at;
            self.held.clear();
            return Released { text, stopped: true };
        }
        let keep = self.stops.iter().map(|s| partial_suffix(&self.held, s)).max().unwrap_or(0);
        let cut = self.held.len() - keep;
        let text = self.held[..cut].to_owned();
        self.through = self.unreleased_from() + cut;
        self.held.drain(..cut);
        Released { text, stopped: false }
    }

    /// Where the held text begins in the answer's bytes.
    fn unreleased_from(&self) -> usize {
        self.pushed.saturating_sub(self.pending_bytes.len() + self.held.len())
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `stop`, on a char boundary.
fn partial_suffix(text: &str, stop: &str) -> usize {
    (1..stop.len().min(text.len() + 1))
        .rev()
        .find(|&n| text.is_char_boundary(text.len() - n) && stop.is_char_boundary(n) && text.ends_with(&stop[..n]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reassembles_split_characters() {
        let mut t = TextAssembler::new(vec![]);
        let euro = "€".as_bytes();
        assert_eq!(t.push(&euro[..1]).text, "");
        assert_eq!(t.push(&euro[1..]).text, "€");
    }

    #[test]
    fn holds_possible_stop_prefix_and_cuts_at_stop() {
        let mut t = TextAssembler::new(vec!["END".into()]);
        assert_eq!(t.push(b"hello E"), Released { text: "hello ".into(), stopped: false });
        assert_eq!(t.push(b"N"), Released { text: String::new(), stopped: false });
        assert_eq!(t.push(b"D and more"), Released { text: String::new(), stopped: true });
    }

    #[test]
    fn releases_held_text_when_stop_does_not_follow() {
        let mut t = TextAssembler::new(vec!["END".into()]);
        assert_eq!(t.push(b"E").text, "");
        assert_eq!(t.push(b"x").text, "Ex");
        assert_eq!(t.push(b"EN").text, "");
        assert_eq!(t.finish(), "EN");
    }

    #[test]
    fn through_counts_the_released_bytes_and_stops_where_the_stop_began() {
        let mut t = TextAssembler::new(vec!["END".into()]);
        t.push(b"ab");
        assert_eq!(t.through(), 2);
        t.push("€".as_bytes().get(..1).unwrap_or_default());
        assert_eq!(t.through(), 2, "half a character is not released");
        t.push("€".as_bytes().get(1..).unwrap_or_default());
        t.push(b" E");
        assert_eq!(t.through(), 6, "`E` may begin the stop");
        t.push(b"ND more");
        assert_eq!(t.through(), 6);
        assert_eq!(t.finish(), "", "nothing after a stop");
        assert_eq!(t.through(), 6);
        let mut plain = TextAssembler::new(vec![]);
        plain.push(&[0xE2]);
        assert_eq!((plain.finish(), plain.through()), ("\u{fffd}".to_owned(), 1));
    }

    #[test]
    fn earliest_stop_wins() {
        let mut t = TextAssembler::new(vec!["b".into(), "a".into()]);
        assert_eq!(t.push(b"xxaxb"), Released { text: "xx".into(), stopped: true });
    }
}
