//! What each recent request cost the engine, for the gateway to ask after it cut the request.
//!
//! A gateway that cuts a request (its client left, or the request ran past its deadline) closes the
//! connection; the worker then frees the sequence at its next step, having read some of the prompt and
//! generated some tokens that never reached anyone. Those are billed (docs/finance.md, work not received
//! in full), so the gateway asks `GET /v1/requests/{id}/usage` (signed like every request) and gets the
//! engine's own count, once the engine has let the request go.
//!
//! Every request that carries an `x-request-id` is entered when it is submitted; the engine reports its
//! final count when it lets the job go, whatever the reason ([`Reporter`]'s drop: finished, failed,
//! dropped for a closed connection, or never admitted). Ended entries are kept for [`KEEP_ENDED`], so the
//! book holds the requests running plus those of the last half minute, and at most [`MAX_ENDED`] of those.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use runaii_wire::Usage;
use tokio::sync::watch;

/// How long a finished request's count is kept: the gateway asks right after it cut the request.
const KEEP_ENDED: Duration = Duration::from_secs(30);
/// The most ended requests kept, whatever the rate.
const MAX_ENDED: usize = 100_000;
/// Longest a request id may be to be entered (the gateway's are ~40 characters).
const MAX_ID_LEN: usize = 128;

#[derive(Debug, Default)]
pub struct WorkBook {
    inner: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    entries: HashMap<String, watch::Receiver<Option<Usage>>>,
    ended: VecDeque<(Instant, String)>,
}

impl WorkBook {
    /// Enters a request about to be submitted; the engine reports through the returned [`Reporter`].
    /// Nothing is entered for a request without a usable id (a direct caller's).
    pub fn enter(self: &Arc<Self>, id: Option<&str>) -> Reporter {
        let Some(id) = id.filter(|id| !id.is_empty() && id.len() <= MAX_ID_LEN) else { return Reporter::default() };
        let (tx, rx) = watch::channel(None);
        self.lock().entries.insert(id.to_owned(), rx);
        Reporter { sink: Some((Arc::clone(self), id.to_owned(), tx)), work: Usage::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn ended(&self, id: String) {
        let now = Instant::now();
        let mut book = self.lock();
        book.ended.push_back((now, id));
        while book.ended.front().is_some_and(|(at, _)| now.duration_since(*at) > KEEP_ENDED) || book.ended.len() > MAX_ENDED {
            if let Some((_, old)) = book.ended.pop_front() {
                // Only if not entered again since under the same id.
                if book.entries.get(&old).is_some_and(|rx| rx.borrow().is_some()) {
                    book.entries.remove(&old);
                }
            }
        }
    }

    /// The work done for request `id`, once the engine has let it go (waiting at most `wait`). `None`
    /// for an id this worker does not know (or no longer), or one still running after `wait`.
    pub async fn work_of(&self, id: &str, wait: Duration) -> Option<Usage> {
        let mut rx = self.lock().entries.get(id).cloned()?;
        let ended = tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await.ok()?.ok()?;
        *ended
    }
}

/// The engine's report of one job's work, sent when the job is let go (dropped).
#[derive(Debug, Default)]
pub struct Reporter {
    sink: Option<(Arc<WorkBook>, String, watch::Sender<Option<Usage>>)>,
    work: Usage,
}

impl Reporter {
    /// The work done so far: the prompt tokens read (cached ones among them) and the tokens generated.
    pub fn set(&mut self, work: Usage) {
        self.work = work;
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        if let Some((book, id, tx)) = self.sink.take() {
            let _ = tx.send(Some(self.work));
            book.ended(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_s_work_is_told_once_it_is_let_go() {
        let book = Arc::new(WorkBook::default());
        let mut reporter = book.enter(Some("chatcmpl-1"));
        assert_eq!(book.work_of("chatcmpl-1", Duration::from_millis(10)).await, None, "still running");
        reporter.set(Usage::new(120, 7).with_cached(100));
        drop(reporter);
        let work = book.work_of("chatcmpl-1", Duration::from_millis(10)).await;
        assert_eq!(work, Some(Usage::new(120, 7).with_cached(100)));
        assert_eq!(book.work_of("chatcmpl-2", Duration::from_millis(10)).await, None, "unknown");
        drop(book.enter(None));
        assert_eq!(book.lock().entries.len(), 1, "nothing entered without an id");
    }
}
