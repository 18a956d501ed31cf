//! What this replica knows of a worker's load that the worker's last reported status cannot: the
//! requests it has in flight there right now, and those it finished since the status was taken. A status
//! comes from a probe or an announcement and is up to a probe interval old; routing on it alone sends a
//! request to a worker this replica is itself keeping busy, or away from one whose request already ended
//! (and with it, from the worker whose cache holds the prompt).
//!
//! The estimate of busy slots is the larger of the two things known: this replica's own requests in
//! flight, and the status's count less the requests of this replica that finished since it was taken.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::WorkerStatus;

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    in_flight: u64,
    /// Requests to the worker this replica has finished, ever: marks are positions in this count.
    finished: u64,
}

/// This replica's requests, by worker URL. (One entry per worker URL ever used: a fleet's worth.)
#[derive(Debug, Default, Clone)]
pub struct LocalLoad(Arc<Mutex<HashMap<String, Counts>>>);

/// How many of this replica's requests to a worker had finished when its status was taken.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mark(u64);

impl LocalLoad {
    /// Counts a request to `url` as in flight until the returned guard drops.
    #[must_use]
    pub fn start(&self, url: &str) -> InFlight {
        self.with(|counts| counts.entry(url.to_owned()).or_default().in_flight += 1);
        InFlight { load: self.clone(), url: url.to_owned() }
    }

    /// Taken just before asking a worker for its status.
    #[must_use]
    pub fn mark(&self, url: &str) -> Mark {
        Mark(self.with(|counts| counts.get(url).map_or(0, |c| c.finished)))
    }

    /// `status` with its busy slots estimated as this replica knows them; `mark` is when it was taken,
    /// when that is known.
    pub fn adjust(&self, status: &mut WorkerStatus, mark: Option<Mark>) {
        let Counts { in_flight, finished } = self.with(|counts| counts.get(&status.url).copied().unwrap_or_default());
        let ended_since = mark.map_or(0, |Mark(at)| finished.saturating_sub(at));
        status.slots_busy = in_flight.max(status.slots_busy.saturating_sub(ended_since));
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, Counts>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// One request in flight to a worker: counted as finished when dropped (answered, failed or abandoned).
#[derive(Debug)]
pub struct InFlight {
    load: LocalLoad,
    url: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.load.with(|counts| {
            if let Some(c) = counts.get_mut(&self.url) {
                c.in_flight = c.in_flight.saturating_sub(1);
                c.finished += 1;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(busy: u64) -> WorkerStatus {
        WorkerStatus { url: "http://w:1".into(), model: "m".into(), slots: 1, slots_busy: busy, queue_depth: 0 }
    }

    fn busy(load: &LocalLoad, reported: u64, mark: Option<Mark>) -> u64 {
        let mut s = status(reported);
        load.adjust(&mut s, mark);
        s.slots_busy
    }

    #[test]
    fn a_request_in_flight_counts_before_any_status_shows_it() {
        let load = LocalLoad::default();
        let request = load.start("http://w:1");
        assert_eq!(busy(&load, 0, None), 1, "the status predates the request");
        drop(request);
        assert_eq!(busy(&load, 0, None), 0);
    }

    #[test]
    fn a_request_that_ended_after_the_status_was_taken_no_longer_counts() {
        let load = LocalLoad::default();
        let request = load.start("http://w:1");
        let mark = load.mark("http://w:1");
        // The status, taken at `mark`, shows the request busy; then it ends.
        drop(request);
        assert_eq!(busy(&load, 1, Some(mark)), 0, "this replica knows the slot is free again");
        assert_eq!(busy(&load, 1, None), 1, "without a mark the status stands");
        let later = load.mark("http://w:1");
        assert_eq!(busy(&load, 1, Some(later)), 1, "a status taken after the end is another replica's request");
    }
}
