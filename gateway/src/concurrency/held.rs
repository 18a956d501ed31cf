//! A response that holds its request's [`Slot`] until its body has been sent or dropped: a stream's
//! request is in flight until its last event, not until its headers.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Frame, SizeHint};

use super::Slot;

/// `response` with `slot` given back when its body ends.
#[must_use]
pub fn hold(response: Response, slot: Slot) -> Response {
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, Body::new(Held { body, _slot: slot }))
}

struct Held {
    body: Body,
    _slot: Slot,
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
