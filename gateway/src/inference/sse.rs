//! Reading a worker's server-sent events: the `data` of each event, in order.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use runaii_sse::SseParser;

use crate::upstream::body::next_within;

/// Splits a byte stream into SSE events ([`SseParser`]) and yields each event's `data`, within an idle
/// limit and a size bound.
pub struct SseReader<S> {
    inner: S,
    parser: SseParser,
    /// Events complete but not yet taken: a read often holds many.
    ready: VecDeque<String>,
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
        Self { inner, parser: SseParser::default(), ready: VecDeque::new(), ended: false, idle }
    }

    /// The next event's data; `Ok(None)` at the end of the stream.
    ///
    /// # Errors
    /// The transport's error, silence past the idle limit, or an event past [`MAX_EVENT_BYTES`], as text.
    pub async fn next_data(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(data) = self.ready.pop_front() {
                return Ok(Some(data));
            }
            if self.ended {
                return Ok(None);
            }
            if self.parser.pending_bytes() > MAX_EVENT_BYTES {
                return Err(format!("the worker sent an event larger than {MAX_EVENT_BYTES} bytes"));
            }
            match next_within(&mut self.inner, self.idle).await.map_err(|e| e.to_string())? {
                Some(bytes) => self.ready.extend(self.parser.push(&bytes)),
                None => self.ended = true,
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
    async fn a_silent_worker_and_an_endless_event_fail_the_stream() {
        let silent = futures::stream::pending::<Result<Bytes, std::io::Error>>();
        let mut reader = SseReader::new(silent, Duration::from_millis(50));
        assert!(reader.next_data().await.unwrap_err().contains("sent nothing for 50 ms"));

        let flood = futures::stream::repeat_with(|| Ok::<_, std::io::Error>(Bytes::from(vec![b'a'; 64 * 1024])));
        let mut reader = SseReader::new(flood, Duration::from_secs(1));
        assert!(reader.next_data().await.unwrap_err().contains("larger than"));
    }
}
