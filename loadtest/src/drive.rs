//! Driving the load: open loop (requests due on a clock) or closed loop (N clients, each sending its next
//! request when the last one ended).
//!
//! The open loop never waits on answers to send: request `n` is due at `start + n / rate`, and its latency
//! counts from then, not from when it actually left. A gateway that stalls therefore shows the stall in
//! every request that was due during it, instead of the load quietly slowing down with it (coordinated
//! omission).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::body::{self, BodySpec};
use crate::mix::{Kind, Mix, Picker};
use crate::observe::Observation;
use crate::send::{send, Target};

#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// Requests per second, due on the clock.
    Open { rate: f64 },
    /// Clients, each with one request at a time.
    Closed { concurrency: u32 },
}

/// When to stop: after `requests`, after `duration`, whichever comes first.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub mode: Mode,
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    /// Open loop: requests past this many in flight are not sent, and counted as skipped, so a target
    /// that stops answering cannot exhaust the client's memory or ports.
    pub max_in_flight: usize,
}

#[derive(Debug)]
pub struct Run {
    pub observations: Vec<Observation>,
    /// From the first request due to the last answer.
    pub elapsed: Duration,
    /// Open loop: requests due while `max_in_flight` were in flight.
    pub skipped: u64,
}

/// Runs the plan against `target` and returns every request's observation, in the order they ended.
pub async fn run(target: Arc<Target>, spec: BodySpec, mix: &Mix, plan: Plan) -> Run {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start = Instant::now();
    let skipped = match plan.mode {
        Mode::Open { rate } => open_loop(&target, &spec, mix.picker(), plan, rate, start, &tx).await,
        Mode::Closed { concurrency } => {
            closed_loop(&target, &spec, mix.picker(), plan, concurrency, start, &tx).await;
            0
        }
    };
    // Every sender is a request task (or a closed-loop client); the channel ends when the last one does.
    drop(tx);
    let mut observations = Vec::new();
    while let Some(o) = rx.recv().await {
        observations.push(o);
    }
    Run { observations, elapsed: start.elapsed(), skipped }
}

fn past_end(plan: &Plan, n: u64, since_start: Duration) -> bool {
    plan.requests.is_some_and(|r| n >= r) || plan.duration.is_some_and(|d| since_start >= d)
}

async fn open_loop(
    target: &Arc<Target>,
    spec: &BodySpec,
    mut picker: Picker,
    plan: Plan,
    rate: f64,
    start: Instant,
    tx: &mpsc::UnboundedSender<Observation>,
) -> u64 {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut skipped = 0;
    for n in 0u64.. {
        // Time, not money: a float is right here.
        let offset = Duration::from_secs_f64(n as f64 / rate);
        if past_end(&plan, n, offset) {
            break;
        }
        let due = start + offset;
        tokio::time::sleep_until(due).await;
        let kind = picker.next_kind();
        if in_flight.load(Ordering::Relaxed) >= plan.max_in_flight {
            skipped += 1;
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let (target, tx, in_flight, body) = (Arc::clone(target), tx.clone(), Arc::clone(&in_flight), body::build(spec, kind, n));
        tokio::spawn(async move {
            let seen = send(&target, n, kind, &body, due).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
            let _ = tx.send(seen);
        });
    }
    skipped
}

async fn closed_loop(
    target: &Arc<Target>,
    spec: &BodySpec,
    picker: Picker,
    plan: Plan,
    concurrency: u32,
    start: Instant,
    tx: &mpsc::UnboundedSender<Observation>,
) {
    // The number and kind are taken together, so request n always has the kind the mix gives n.
    let next: Arc<Mutex<(u64, Picker)>> = Arc::new(Mutex::new((0, picker)));
    let mut clients = Vec::new();
    for _ in 0..concurrency {
        let (target, spec, tx, next) = (Arc::clone(target), spec.clone(), tx.clone(), Arc::clone(&next));
        clients.push(tokio::spawn(async move {
            while let Some((n, kind)) = take(&next, &plan, start) {
                let seen = send(&target, n, kind, &body::build(&spec, kind, n), Instant::now()).await;
                let _ = tx.send(seen);
            }
        }));
    }
    for client in clients {
        let _ = client.await;
    }
}

fn take(next: &Mutex<(u64, Picker)>, plan: &Plan, start: Instant) -> Option<(u64, Kind)> {
    let mut guard = next.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (n, picker) = &mut *guard;
    if past_end(plan, *n, start.elapsed()) {
        return None;
    }
    let taken = (*n, picker.next_kind());
    *n += 1;
    Some(taken)
}
