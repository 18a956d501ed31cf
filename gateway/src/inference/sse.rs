//! Reading a worker's server-sent events: the `data` of each event, in order.

use std::time::Duration;

use bytes::Bytes;
use futures::Stream;

use crate::upstream::body::next_within;

/// Splits a byte stream into SSE events and yields each event's `data` (lines joined with `\n`).
/// Comment-only events (keep-alives) are skipped.
pub struct SseReader<S> {
    inner: S,
    buffer: String,
    /// Where the events not yet taken begin in `buffer`: taken events are dropped from its front once per
    /// read, not once per event (a read often holds many).
    start: usize,
    /// The start of a character split across two reads, kept until the rest arrives.
    partial: Vec<u8>,
    ended: bool,
    /// How long the worker may stay silent before the stream fails.
    idle: Duration,
}

/// The largest event a worker may send (a chunk carries a few tokens): a worker that never ends its
/// event fails the stream instead of growing the gateway's buffer.
const MAX_EVENT_BYTES: usize = 4 * 1024 * 1024;

impl<S, E> SseReader<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    pub fn new(inner: S, idle: Duration) -> Self {
        Self { inner, buffer: String::new(), start: 0, partial: Vec::new(), ended: false, idle }
    }

    /// The next event's data; `Ok(None)` at the end of the stream.
    ///
    /// # Errors
    /// The transport's error, silence past the idle limit, or an event past [`MAX_EVENT_BYTES`], as text.
    pub async fn next_data(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(data) = self.take_event() {
                return Ok(Some(data));
            }
            if self.ended {
                return Ok(None);
            }
            if self.buffer.len() - self.start > MAX_EVENT_BYTES {
                return Err(format!("the worker sent an event larger than {MAX_EVENT_BYTES} bytes"));
            }
            match next_within(&mut self.inner, self.idle).await.map_err(|e| e.to_string())? {
                Some(bytes) => self.push(&bytes),
                None => self.ended = true,
            }
        }
    }

    /// Appends bytes as text. A read may end inside a character: its first bytes wait for the next read
    /// rather than becoming U+FFFD.
    fn push(&mut self, bytes: &[u8]) {
        self.buffer.drain(..self.start);
        self.start = 0;
        self.partial.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.partial) {
            Ok(text) => text.len(),
            // At most 3 bytes can be the start of a character still to come; anything else is invalid.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.partial.len(),
        };
        let rest = self.partial.split_off(valid);
        let text = String::from_utf8_lossy(&self.partial);
        if text.contains('\r') {
            self.buffer.push_str(&text.replace("\r\n", "\n"));
        } else {
            self.buffer.push_str(&text);
        }
        self.partial = rest;
    }

    fn take_event(&mut self) -> Option<String> {
        loop {
            let rest = &self.buffer[self.start..];
            let end = rest.find("\n\n")?;
            let mut lines = rest[..end].lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d));
            let data = lines.next().map(|first| {
                let mut data = first.to_owned();
                for line in lines {
                    data.push('\n');
                    data.push_str(line);
                }
                data
            });
            self.start += end + 2;
            if data.is_some() {
                return data;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_events_across_chunk_boundaries_and_skips_comments() {
        let parts: Vec<Result<Bytes, std::io::Error>> =
            vec![Ok(Bytes::from(": keep-alive\n\ndata: {\"a\"")), Ok(Bytes::from(":1}\n\ndata:[DONE]\n\n"))];
        let mut reader = SseReader::new(futures::stream::iter(parts), Duration::from_secs(1));
        assert_eq!(reader.next_data().await.unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(reader.next_data().await.unwrap().as_deref(), Some("[DONE]"));
        assert_eq!(reader.next_data().await.unwrap(), None);
    }

    #[tokio::test]
    async fn many_events_in_one_read_and_multi_line_data_come_out_in_order() {
        let parts: Vec<Result<Bytes, std::io::Error>> =
            vec![Ok(Bytes::from("data: 1\n\ndata: a\r\ndata:b\r\n\nid: 7\n\ndata: 2\n")), Ok(Bytes::from("\ndata: 3\n\n"))];
        let mut reader = SseReader::new(futures::stream::iter(parts), Duration::from_secs(1));
        for want in ["1", "a\nb", "2", "3"] {
            assert_eq!(reader.next_data().await.unwrap().as_deref(), Some(want));
        }
        assert_eq!(reader.next_data().await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_character_split_across_reads_arrives_whole() {
        let text = "data: {\"t\":\"é€😀\"}\n\n".as_bytes().to_vec();
        // Every split point, including inside each multi-byte character.
        for cut in 1..text.len() {
            let parts: Vec<Result<Bytes, std::io::Error>> =
                vec![Ok(Bytes::copy_from_slice(&text[..cut])), Ok(Bytes::copy_from_slice(&text[cut..]))];
            let mut reader = SseReader::new(futures::stream::iter(parts), Duration::from_secs(1));
            assert_eq!(reader.next_data().await.unwrap().as_deref(), Some("{\"t\":\"é€😀\"}"), "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn a_silent_worker_and_an_endless_event_fail_the_stream() {
        let silent = futures::stream::pending::<Result<Bytes, std::io::Error>>();
        let mut reader = SseReader::new(silent, Duration::from_millis(50));
        assert!(reader.next_data().await.unwrap_err().contains("sent nothing for 50 ms"));

        let flood = futures::stream::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from(vec![b'a'; 64 * 1024])));
        let mut reader = SseReader::new(flood, Duration::from_secs(1));
        assert!(reader.next_data().await.unwrap_err().contains("larger than"));
    }
}
