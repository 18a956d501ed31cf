//! Where a background response's events are kept, so that any replica can stream them.
//!
//! Each response has one Redis Stream, `runaii:response-events:{tenant}:{id}`, whose entry ids are the
//! events' sequence numbers (`1-N`), so a resume is one `XRANGE` from the id after N. It is bounded: the
//! last [`MAX_EVENTS`] events are kept, and it expires [`MAX_TTL`] after its last event, or with the
//! response's retention if that is shorter. Reading them back to a client is
//! `inference/responses/replay.rs`.

use std::time::Duration;

use bytes::Bytes;
use uuid::Uuid;

use crate::redis_link::RedisLink;

/// The most events kept per response; past it the oldest go.
pub const MAX_EVENTS: u64 = 10_000;
/// The longest the events are kept after the last one.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// Entries read per `XRANGE`.
const PAGE: usize = 256;

/// The events' store: its own Redis link, so a slow stream never holds up the limiter or the registry.
#[derive(Debug)]
pub struct EventLog {
    redis: RedisLink,
}

fn key(tenant: Uuid, id: &str) -> String {
    format!("runaii:response-events:{tenant}:{id}")
}

impl EventLog {
    #[must_use]
    pub fn new(redis: RedisLink) -> Self {
        Self { redis }
    }

    /// Appends `events` (sequence number, the event as sent) to the response's log and sets it to expire
    /// `ttl` after them; whether Redis took them. A log Redis did not take costs the readers their live
    /// events, never the response.
    pub async fn append(&self, tenant: Uuid, id: &str, events: &[(u64, Bytes)], ttl: Duration) -> bool {
        if events.is_empty() {
            return true;
        }
        let key = key(tenant, id);
        let mut pipe = redis::pipe();
        for (sequence, event) in events {
            pipe.cmd("XADD").arg(&key).arg("MAXLEN").arg(MAX_EVENTS).arg(format!("1-{sequence}")).arg("e").arg(event.as_ref()).ignore();
        }
        pipe.cmd("EXPIRE").arg(&key).arg(ttl.as_secs().max(1)).ignore();
        self.redis.run(|mut redis| async move { pipe.query_async::<()>(&mut redis).await }).await.is_some()
    }

    /// The events after sequence number `after` (all kept, for `None`), oldest first, at most [`PAGE`];
    /// `None` when Redis is unavailable.
    pub(crate) async fn after(&self, tenant: Uuid, id: &str, after: Option<u64>) -> Option<Vec<(u64, Bytes)>> {
        let start = after.map_or_else(|| "-".to_owned(), |n| format!("(1-{n}"));
        self.range("XRANGE", key(tenant, id), start, "+", PAGE).await
    }

    /// The last event kept.
    pub(crate) async fn last(&self, tenant: Uuid, id: &str) -> Option<Option<(u64, Bytes)>> {
        let entries = self.range("XREVRANGE", key(tenant, id), "+".to_owned(), "-", 1).await?;
        Some(entries.into_iter().next())
    }

    /// `command` (`XRANGE` or `XREVRANGE`) from `from` to `to`, at most `count` entries, each as its
    /// sequence number and event; `None` when Redis is unavailable.
    async fn range(&self, command: &'static str, key: String, from: String, to: &'static str, count: usize) -> Option<Vec<(u64, Bytes)>> {
        let entries = self
            .redis
            .run(|mut redis| async move {
                redis::cmd(command)
                    .arg(key)
                    .arg(from)
                    .arg(to)
                    .arg("COUNT")
                    .arg(count)
                    .query_async::<Vec<(String, Vec<Vec<u8>>)>>(&mut redis)
                    .await
            })
            .await?;
        Some(entries.into_iter().filter_map(entry).collect())
    }
}

/// An entry (`1-N`, `[e, event]`) as its sequence number and event.
fn entry((id, mut fields): (String, Vec<Vec<u8>>)) -> Option<(u64, Bytes)> {
    let sequence = id.strip_prefix("1-")?.parse().ok()?;
    (fields.len() == 2).then(|| (sequence, Bytes::from(fields.swap_remove(1))))
}
