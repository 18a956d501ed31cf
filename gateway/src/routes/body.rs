//! Request bodies arrive under a deadline and a size limit, and are read only by the handler that needs
//! them: after its credential was checked, so a client without a valid key cannot make the gateway
//! buffer megabytes (it gets its 401 while its body is still on the wire).
//!
//! A client that sends headers and then trickles its body (or stops) would otherwise hold a connection,
//! a task and a growing buffer for as long as it likes: the body's frames stop arriving
//! `body_read_timeout_ms` after the request did, and the size limit is axum's `DefaultBodyLimit`.
//!
//! The deadline is written here, not with `tower-http`'s `RequestBodyTimeoutLayer`: that one restarts its
//! timer after every frame and starts it at the first read, so a body that sends a byte just inside the
//! timeout is never cut; this one bounds the whole body from the request's arrival. The limit stays
//! axum's rather than `tower-http`'s `RequestBodyLimitLayer`, which answers a `Content-Length` over the
//! limit itself: in plain text, in no dialect's error shape, and before the credential is checked. Both
//! wrap the body in `http_body_util::Limited`; axum's leaves the refusal to the handler that reads it.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::extract::BodyDeadline;

/// How long a route's bodies may take to arrive, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window(pub u64);

pub(super) async fn read_in_time(State(Window(timeout_ms)): State<Window>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    next.run(Request::from_parts(parts, Body::new(Deadline { inner: body, deadline, expires: None, timeout_ms }))).await
}

/// A body that fails with [`BodyDeadline`] once its time is up. The timer is made only when the body
/// first makes its reader wait: a body that came with its headers (most do) costs no timer.
struct Deadline {
    inner: Body,
    deadline: Instant,
    expires: Option<Pin<Box<Sleep>>>,
    timeout_ms: u64,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let deadline = self.deadline;
        let expires = self.expires.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if expires.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(axum::Error::new(BodyDeadline(self.timeout_ms)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
