//! Reading a worker's server-sent events: the `data` of each event, in order.

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// Splits a byte stream into SSE events and yields each event's `data` (lines joined with `\n`).
/// Comment-only events (keep-alives) are skipped.
pub struct SseReader<S> {
    inner: S,
    buffer: String,
    ended: bool,
}

impl<S, E> SseReader<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    pub fn new(inner: S) -> Self {
        Self { inner, buffer: String::new(), ended: false }
    }

    /// The next event's data; `Ok(None)` at the end of the stream.
    ///
    /// # Errors
    /// The transport's error, as text.
    pub async fn next_data(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(data) = self.take_event() {
                return Ok(Some(data));
            }
            if self.ended {
                return Ok(None);
            }
            match self.inner.next().await {
                Some(Ok(bytes)) => self.buffer.push_str(&String::from_utf8_lossy(&bytes).replace("\r\n", "\n")),
                Some(Err(e)) => return Err(e.to_string()),
                None => self.ended = true,
            }
        }
    }

    fn take_event(&mut self) -> Option<String> {
        while let Some(end) = self.buffer.find("\n\n") {
            let event: String = self.buffer.drain(..end + 2).collect();
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

    #[tokio::test]
    async fn splits_events_across_chunk_boundaries_and_skips_comments() {
        let parts: Vec<Result<Bytes, std::io::Error>> =
            vec![Ok(Bytes::from(": keep-alive\n\ndata: {\"a\"")), Ok(Bytes::from(":1}\n\ndata:[DONE]\n\n"))];
        let mut reader = SseReader::new(futures::stream::iter(parts));
        assert_eq!(reader.next_data().await.unwrap().as_deref(), Some("{\"a\":1}"));
        assert_eq!(reader.next_data().await.unwrap().as_deref(), Some("[DONE]"));
        assert_eq!(reader.next_data().await.unwrap(), None);
    }
}
