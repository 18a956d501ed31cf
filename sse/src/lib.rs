//! Server-sent events, read as the official SDKs read them: lines end with LF, CRLF or CR; a blank line
//! ends an event; `data:` lines are joined with `\n`; comments (`:`) and other fields are ignored, and an
//! event without data (a keep-alive) yields nothing.
//!
//! Bytes are decoded a line at a time, once the line has ended, so a character split across two reads
//! arrives whole.

/// Feeds bytes in, takes complete events' `data` out.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Option<String>,
    /// The last byte was CR: an LF right after it ends the same line.
    after_cr: bool,
}

impl SseParser {
    /// The `data` of every event that `bytes` completes, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.end_line(&line, &mut events);
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
        events
    }

    /// The bytes held for the event not yet complete: a sender that never ends its event makes this grow,
    /// and a reader bounds it.
    #[must_use]
    pub fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.as_ref().map_or(0, String::len)
    }

    fn end_line(&mut self, line: &[u8], events: &mut Vec<String>) {
        if line.is_empty() {
            events.extend(self.data.take());
            return;
        }
        let line = String::from_utf8_lossy(line);
        if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_reads_and_line_endings() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: {\"a\"").is_empty());
        assert_eq!(p.push(b":1}\n\n: keep-alive\n\ndata:x\r\ndata: y\r\n\r\nevent: e\ndata: [DONE]\r\r"), ["{\"a\":1}", "x\ny", "[DONE]"]);
        assert!(p.push(b"data: partial\n").is_empty(), "no blank line yet");
        assert_eq!(p.pending_bytes(), "partial".len());
    }

    #[test]
    fn a_character_split_across_reads_arrives_whole() {
        let text = "data: {\"t\":\"é€😀\"}\n\n".as_bytes();
        for cut in 1..text.len() {
            let mut p = SseParser::default();
            let mut events = p.push(&text[..cut]);
            events.extend(p.push(&text[cut..]));
            assert_eq!(events, ["{\"t\":\"é€😀\"}"], "cut at {cut}");
        }
    }
}
