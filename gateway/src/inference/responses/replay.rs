//! A background response's events, kept in Redis so that any replica can stream them: to the client that
//! created it with `stream: true`, and to one that comes back with `GET /v1/responses/{id}?stream=true`
//! (`starting_after=N` for the events after sequence number N).
//!
//! The events are kept in an [`EventLog`](crate::response_events::EventLog); a longer answer's replay
//! starts later, its final event whole.
//!
//! A reader only reads: it holds no worker, no credit and no slot, and a client that leaves it leaves the
//! response running (only `POST /v1/responses/{id}/cancel` stops it). It polls Redis every `POLL` and
//! the response's stored status every `STATUS_EVERY`; it ends after the response's final event, at
//! once when the response is cancelled, and, when the final event is not in Redis (Redis was away, or the
//! events expired), with that event written from the stored response.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::events::response_event;
use crate::db::responses as rows;
use crate::inference::stream::Completion;
use crate::request_id;
use crate::response_events::MAX_TTL;
use crate::state::AppState;

/// How often a reader looks for new events.
const POLL: Duration = Duration::from_millis(50);
/// How often a reader reads the response's stored status.
const STATUS_EVERY: Duration = Duration::from_millis(500);
/// How long a reader waits for the final event of a response stored as finished before writing it from
/// the stored response (the run keeps the response just before its final event goes to Redis).
const GRACE: Duration = Duration::from_secs(2);
/// The final event kinds, by the status a response is stored with.
fn final_kind(status: &str) -> Option<&'static str> {
    match status {
        "completed" => Some("response.completed"),
        "incomplete" => Some("response.incomplete"),
        "failed" => Some("response.failed"),
        _ => None,
    }
}

fn is_final(event: &[u8]) -> bool {
    ["completed", "incomplete", "failed"].iter().any(|s| event.starts_with(format!("event: response.{s}\n").as_bytes()))
}

/// What a background response's run writes to its log: the events as its stream gives them, each under
/// its sequence number.
#[derive(Debug)]
pub struct Recorder {
    tenant: Uuid,
    id: String,
    ttl: Duration,
    /// The next event's sequence number.
    next: u64,
    /// A partial event, should a chunk of the stream end inside one.
    partial: Vec<u8>,
}

impl Recorder {
    /// For the response `id` kept `retention_hours`; its `response.created` (sequence 0) is written by
    /// [`Recorder::record`] like any other.
    #[must_use]
    pub fn new(tenant: Uuid, id: String, retention_hours: i32) -> Self {
        let retention = Duration::from_secs(u64::try_from(retention_hours).unwrap_or(1).saturating_mul(3600));
        Self { tenant, id, ttl: retention.min(MAX_TTL), next: 0, partial: Vec::new() }
    }

    /// The next event's sequence number.
    #[must_use]
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Records the whole events in `chunk` (the stream's bytes, in order).
    pub async fn record(&mut self, state: &AppState, chunk: &[u8]) {
        self.partial.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(end) = self.partial.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.partial.drain(..end + 2).collect();
            events.push((self.next, Bytes::from(event)));
            self.next += 1;
        }
        if !state.response_events.append(self.tenant, &self.id, &events, self.ttl).await {
            tracing::warn!(response_id = %self.id, events = events.len(), "background response events not kept");
        }
    }
}

/// Streams the tenant's background response `id`: its events after sequence number `after` (all, for
/// `None`), then live ones to its end. `first` is sent before any read (the `response.created` a create
/// call already has), and counts as read.
pub fn stream(state: AppState, tenant: Uuid, id: String, after: Option<u64>, first: Option<(u64, Bytes)>) -> Response {
    let (completed, completion) = oneshot::channel();
    let ends = Instant::now() + Duration::from_secs(u64::from(state.settings.limits.max_request_s)) + MAX_WAIT_PAST_RUN;
    let (after, first) = match first {
        Some((sequence, event)) => (Some(sequence), Some(event)),
        None => (after, None),
    };
    let reader = Reader { state, tenant, id: id.clone(), after, checked: None, finished_at: None, ends, completed: Some(completed) };
    let events = futures::stream::unfold((reader, first), |(mut reader, first)| async move {
        let next = match first {
            Some(event) => Some(event),
            None => reader.next().await,
        };
        next.map(|bytes| (Ok::<_, std::convert::Infallible>(bytes), (reader, None)))
    });
    let mut response =
        ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(events)).into_response();
    request_id::attach(&mut response, &id);
    response.extensions_mut().insert(Completion::new(completion));
    response
}

/// How long past the longest run (`--max-request-s`) a reader may wait: a response whose run was lost
/// with its replica stays `in_progress`, and its readers end then.
const MAX_WAIT_PAST_RUN: Duration = Duration::from_secs(60);

struct Reader {
    state: AppState,
    tenant: Uuid,
    id: String,
    /// The sequence number of the last event sent.
    after: Option<u64>,
    checked: Option<Instant>,
    /// When the response was first seen stored as finished without its final event read.
    finished_at: Option<Instant>,
    ends: Instant,
    /// Told whether the final event went out; taken when the stream ends.
    completed: Option<oneshot::Sender<bool>>,
}

impl Reader {
    fn end(&mut self, complete: bool) {
        if let Some(completed) = self.completed.take() {
            let _ = completed.send(complete);
        }
    }

    /// The next events to send, `None` at the end.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            self.completed.as_ref()?;
            let log = &self.state.response_events;
            if let Some(events) = log.after(self.tenant, &self.id, self.after).await.filter(|e| !e.is_empty()) {
                let mut out = Vec::new();
                for (sequence, event) in events {
                    out.extend_from_slice(&event);
                    self.after = Some(sequence);
                    if is_final(&event) {
                        self.end(true);
                        break;
                    }
                }
                return Some(Bytes::from(out));
            }
            if Instant::now() >= self.ends {
                self.end(false);
                return None;
            }
            if self.checked.is_none_or(|at| at.elapsed() >= STATUS_EVERY) {
                self.checked = Some(Instant::now());
                if let Some(last) = self.check().await {
                    return last;
                }
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Reads the stored status: `Some` when the stream ends (with its final event, if written here).
    async fn check(&mut self) -> Option<Option<Bytes>> {
        let status = match rows::status(&self.state.db, self.tenant, &self.id).await {
            Ok(status) => status,
            Err(e) => {
                tracing::warn!(response_id = %self.id, error = %e, "background response status unread");
                return None;
            }
        };
        let Some(status) = status else {
            // Deleted meanwhile.
            self.end(false);
            return Some(None);
        };
        let Some(kind) = final_kind(&status) else {
            if status == "cancelled" {
                self.end(false);
                return Some(None);
            }
            return None;
        };
        let last = self.state.response_events.last(self.tenant, &self.id).await;
        match &last {
            // The final event is kept and was sent (a resume past it): nothing more.
            Some(Some((sequence, event))) if is_final(event) && self.after >= Some(*sequence) => {
                self.end(true);
                return Some(None);
            }
            // Nothing kept: the events expired, or Redis never had them.
            Some(None) => {}
            _ => {
                let since = *self.finished_at.get_or_insert_with(Instant::now);
                if since.elapsed() < GRACE {
                    return None;
                }
            }
        }
        let stored = match rows::get(&self.state.db, self.tenant, &self.id).await {
            Ok(Some(stored)) => stored,
            Ok(None) => {
                self.end(false);
                return Some(None);
            }
            Err(e) => {
                tracing::warn!(response_id = %self.id, error = %e, "background response unread");
                return None;
            }
        };
        let kept = last.flatten().map(|(sequence, _)| sequence);
        let sequence = self.after.max(kept).map_or(0, |n| n + 1);
        self.end(true);
        Some(Some(response_event(kind, sequence, &stored.response)))
    }
}
