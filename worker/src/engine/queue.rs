//! The jobs waiting for a sequence, taken fairly across tenants rather than in arrival order.
//!
//! Each tenant (the cache scope the gateway sends, `runaii_wire::cache_scope`) has its own lane per
//! priority class (`runaii_wire::priority`). When a sequence frees, the next job comes from the online lane
//! whose tenant holds the fewest sequences now, the oldest job first among equals; a batch lane is served
//! only when no online job waits, and only when the engine lets batch jobs take a sequence (it keeps one
//! free for online work, `admission.rs`). So a tenant with many long requests queued does not stand in front of
//! another tenant's one request: that request takes the next free sequence.
//!
//! Why sequences held, and not requests or tokens admitted: every generating sequence gets one token per
//! decode step, so a tenant's share of the sequences is its share of the engine's throughput. Equalising
//! sequences held is deficit round robin with decode steps as the currency, without guessing in advance
//! how long an answer will be (`max_tokens` is only a bound). A tenant alone still gets every sequence.
//!
//! The queue holds at most `capacity` jobs over all lanes; past that a new job is refused and the worker
//! answers `503 worker_overloaded` (the gateway's per-tenant cap keeps one tenant from filling it).

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use runaii_wire::cache_scope::CacheScope;
use runaii_wire::priority::Priority;

/// A job's tenant and class: one lane each.
type Lane = (Priority, CacheScope);

/// The waiting items, by lane; generic so the policy is tested without an engine.
#[derive(Debug)]
pub(super) struct Lanes<T> {
    lanes: HashMap<Lane, VecDeque<(u64, T)>>,
    /// Arrival order, for ties.
    arrivals: u64,
    len: usize,
}

impl<T> Default for Lanes<T> {
    fn default() -> Self {
        Self { lanes: HashMap::new(), arrivals: 0, len: 0 }
    }
}

impl<T> Lanes<T> {
    pub(super) fn push(&mut self, priority: Priority, scope: CacheScope, item: T) {
        self.arrivals += 1;
        self.lanes.entry((priority, scope)).or_default().push_back((self.arrivals, item));
        self.len += 1;
    }

    /// The next item of a class up to `lowest`: from the highest class that has one, the lane whose
    /// tenant `holds` the fewest sequences, the oldest among equals.
    pub(super) fn pop(&mut self, holds: impl Fn(&CacheScope) -> usize, lowest: Priority) -> Option<T> {
        let lane = self
            .lanes
            .iter()
            .filter(|((priority, _), _)| *priority <= lowest)
            .filter_map(|(lane, items)| items.front().map(|(arrival, _)| (lane, *arrival)))
            .min_by_key(|((priority, scope), arrival)| (*priority, holds(scope), *arrival))
            .map(|(lane, _)| lane.clone())?;
        let items = self.lanes.get_mut(&lane)?;
        let (_, item) = items.pop_front()?;
        if items.is_empty() {
            self.lanes.remove(&lane);
        }
        self.len -= 1;
        Some(item)
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }
}

/// The bounded queue between the HTTP side and the engine thread.
#[derive(Debug)]
pub struct JobQueue<T> {
    waiting: Mutex<Waiting<T>>,
    arrived: Condvar,
    capacity: usize,
}

#[derive(Debug)]
struct Waiting<T> {
    lanes: Lanes<T>,
    /// No more jobs will come: the engine stops once its sequences finish.
    closed: bool,
}

impl<T> JobQueue<T> {
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self { waiting: Mutex::new(Waiting { lanes: Lanes::default(), closed: false }), arrived: Condvar::new(), capacity: capacity.max(1) }
    }

    /// Queues a job, or hands it back when the queue is full or closed.
    ///
    /// # Errors
    /// The job itself, not queued.
    pub fn push(&self, priority: Priority, scope: CacheScope, item: T) -> Result<(), T> {
        let mut waiting = self.lock();
        if waiting.closed || waiting.lanes.len() >= self.capacity {
            return Err(item);
        }
        waiting.lanes.push(priority, scope, item);
        drop(waiting);
        self.arrived.notify_one();
        Ok(())
    }

    /// The next job of a class up to `lowest` by the fair rule (the module comment), if one waits.
    pub fn try_pop(&self, holds: impl Fn(&CacheScope) -> usize, lowest: Priority) -> Option<T> {
        self.lock().lanes.pop(holds, lowest)
    }

    /// Waits for a job; `None` once the queue is closed and empty. For the engine thread while it has
    /// nothing to decode.
    pub fn pop_blocking(&self, holds: impl Fn(&CacheScope) -> usize) -> Option<T> {
        let mut waiting = self.lock();
        loop {
            if let Some(item) = waiting.lanes.pop(&holds, Priority::Batch) {
                return Some(item);
            }
            if waiting.closed {
                return None;
            }
            waiting = self.arrived.wait(waiting).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Refuses new jobs; the engine ends once the waiting ones are done.
    pub fn close(&self) {
        self.lock().closed = true;
        self.arrived.notify_all();
    }

    /// Jobs waiting.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().lanes.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> MutexGuard<'_, Waiting<T>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(n: u8) -> CacheScope {
        CacheScope::parse(&format!("tenant-{n}")).unwrap()
    }

    #[test]
    fn another_tenants_job_goes_before_a_tenant_that_holds_sequences() {
        let (a, b) = (scope(1), scope(2));
        let mut lanes = Lanes::default();
        for i in 0..32 {
            lanes.push(Priority::Online, a.clone(), ("a", i));
        }
        lanes.push(Priority::Online, b.clone(), ("b", 0));
        // A holds every sequence: B's one job is next, though it came last.
        let holds = |s: &CacheScope| if *s == a { 8 } else { 0 };
        assert_eq!(lanes.pop(holds, Priority::Batch), Some(("b", 0)));
        assert_eq!(lanes.pop(holds, Priority::Batch), Some(("a", 0)), "then A's, in its own order");
        assert_eq!(lanes.len(), 31);
    }

    #[test]
    fn tenants_holding_as_many_take_turns_in_arrival_order() {
        let (a, b) = (scope(1), scope(2));
        let mut lanes = Lanes::default();
        lanes.push(Priority::Online, a.clone(), "a1");
        lanes.push(Priority::Online, a.clone(), "a2");
        lanes.push(Priority::Online, b.clone(), "b1");
        lanes.push(Priority::Online, b.clone(), "b2");
        // Sequences held as the scheduler would count them: each admitted job holds one.
        let mut held: HashMap<CacheScope, usize> = HashMap::new();
        let mut order = Vec::new();
        while let Some(item) = lanes.pop(|s| held.get(s).copied().unwrap_or(0), Priority::Batch) {
            let owner = if item.starts_with('a') { a.clone() } else { b.clone() };
            *held.entry(owner).or_default() += 1;
            order.push(item);
        }
        assert_eq!(order, ["a1", "b1", "a2", "b2"]);
        assert_eq!(lanes.len(), 0);
    }

    #[test]
    fn batch_jobs_wait_for_every_online_job() {
        let (a, b) = (scope(1), scope(2));
        let mut lanes = Lanes::default();
        lanes.push(Priority::Batch, a.clone(), "batch");
        lanes.push(Priority::Online, b.clone(), "online1");
        lanes.push(Priority::Online, b.clone(), "online2");
        // Even with B holding every sequence and A none, online comes first.
        let holds = |s: &CacheScope| if *s == b { 8 } else { 0 };
        assert_eq!(lanes.pop(holds, Priority::Batch), Some("online1"));
        assert_eq!(lanes.pop(holds, Priority::Batch), Some("online2"));
        assert_eq!(lanes.pop(holds, Priority::Batch), Some("batch"));
        assert_eq!(lanes.pop(holds, Priority::Batch), None);
    }

    #[test]
    fn batch_jobs_wait_while_the_engine_takes_online_work_only() {
        let mut lanes = Lanes::default();
        lanes.push(Priority::Batch, scope(1), "batch");
        assert_eq!(lanes.pop(|_| 0, Priority::Online), None);
        lanes.push(Priority::Online, scope(2), "online");
        assert_eq!(lanes.pop(|_| 0, Priority::Online), Some("online"));
        assert_eq!(lanes.pop(|_| 0, Priority::Batch), Some("batch"));
    }

    #[test]
    fn a_full_queue_hands_the_job_back_and_a_closed_one_ends_the_wait() {
        let queue = JobQueue::new(2);
        assert!(queue.push(Priority::Online, scope(1), 1).is_ok());
        assert!(queue.push(Priority::Online, scope(2), 2).is_ok());
        assert_eq!(queue.push(Priority::Online, scope(3), 3), Err(3));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.pop_blocking(|_| 0), Some(1));
        queue.close();
        assert_eq!(queue.push(Priority::Online, scope(1), 4), Err(4), "closed");
        assert_eq!(queue.pop_blocking(|_| 0), Some(2), "what waited is still served");
        assert_eq!(queue.pop_blocking(|_| 0), None);
    }

    #[test]
    fn a_blocked_engine_wakes_when_a_job_arrives() {
        let queue = std::sync::Arc::new(JobQueue::new(4));
        let engine = {
            let queue = std::sync::Arc::clone(&queue);
            std::thread::spawn(move || queue.pop_blocking(|_| 0))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(queue.push(Priority::Online, scope(1), 7).is_ok());
        assert_eq!(engine.join().ok().flatten(), Some(7));
    }
}
