//! Reading what a worker sends back, assuming nothing of it: a whole answer is read within a size limit
//! and with a limit on silence, and a stream's events are awaited no longer than the idle limit. A worker
//! that hangs or floods costs the request that met it, never the gateway's memory or another request.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

/// The largest whole answer (or error body) read from a worker: far above any answer a context window
/// holds, far below what would hurt the gateway.
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// Why a worker's body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the worker sent nothing for {0} ms")]
    Idle(u128),
    #[error("the worker's answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the worker connection broke: {0}")]
    Transport(String),
}

impl super::Upstream {
    /// The worker's whole answer (or error body), parsed: at most [`MAX_ANSWER_BYTES`], within the idle
    /// limit between pieces.
    ///
    /// # Errors
    /// A [`BodyError`], or a body that is not the JSON expected, as text.
    pub async fn json<T: serde::de::DeserializeOwned>(self) -> Result<T, String> {
        let body = read_whole(self.response, MAX_ANSWER_BYTES, self.limits.worker_idle).await.map_err(|e| e.to_string())?;
        serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
    }
}

/// Reads a whole body: at most `limit` bytes, each piece within `idle` of the previous one.
///
/// # Errors
/// [`BodyError`] when the worker goes silent, sends too much, or the connection breaks.
pub async fn read_whole(response: reqwest::Response, limit: usize, idle: Duration) -> Result<Bytes, BodyError> {
    let mut stream = std::pin::pin!(response.bytes_stream());
    let mut body = BytesMut::new();
    while let Some(piece) = next_within(&mut stream, idle).await? {
        if body.len() + piece.len() > limit {
            return Err(BodyError::TooLarge(limit));
        }
        body.extend_from_slice(&piece);
    }
    Ok(body.freeze())
}

/// The next piece of a worker's byte stream, or `None` at its end.
///
/// # Errors
/// [`BodyError::Idle`] when nothing arrives within `idle`; [`BodyError::Transport`] when it breaks.
pub async fn next_within<S, E>(stream: &mut S, idle: Duration) -> Result<Option<Bytes>, BodyError>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    match tokio::time::timeout(idle, stream.next()).await {
        Err(_) => Err(BodyError::Idle(idle.as_millis())),
        Ok(None) => Ok(None),
        Ok(Some(Ok(piece))) => Ok(Some(piece)),
        Ok(Some(Err(e))) => Err(BodyError::Transport(e.to_string())),
    }
}
