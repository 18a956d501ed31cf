//! Splitting a server-sent event stream into the `data` of each event, as the bytes arrive.

/// Bytes in, event data out. Comment-only events (keep-alives) yield nothing.
///
/// Bytes are kept until an event is complete, so a character split across two reads stays whole.
#[derive(Debug, Default)]
pub struct SseSplitter {
    buffer: Vec<u8>,
}

impl SseSplitter {
    pub fn push(&mut self, bytes: &[u8]) {
        // JSON escapes control characters, so a bare `\r` can only be part of a line ending.
        self.buffer.extend(bytes.iter().filter(|b| **b != b'\r'));
    }

    /// The next complete event's data (its `data:` lines joined with `\n`), if one has arrived.
    pub fn next_data(&mut self) -> Option<String> {
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let event = String::from_utf8_lossy(&raw);
            let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
            if !data.is_empty() {
                return Some(data.join("\n"));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_reads() {
        let mut sse = SseSplitter::default();
        sse.push(b": keep-alive\n\ndata: {\"a\"");
        assert_eq!(sse.next_data(), None);
        sse.push(b":1}\r\n\r\ndata: \"\xc3");
        assert_eq!(sse.next_data().as_deref(), Some("{\"a\":1}"));
        sse.push(b"\xa9\"\n\ndata:[DONE]\n\n");
        assert_eq!(sse.next_data().as_deref(), Some("\"\u{e9}\""));
        assert_eq!(sse.next_data().as_deref(), Some("[DONE]"));
        assert_eq!(sse.next_data(), None);
    }
}
