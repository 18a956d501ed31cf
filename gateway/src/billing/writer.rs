//! One writer per replica commits cost records in groups: it takes whatever is queued, writes it in one
//! transaction (one WAL flush however many records), answers each request, and starts on what queued
//! meanwhile. A request still answers only after its own record is durable.
//!
//! Before committing, the writer waits for records it knows are on their way: non-streamed requests
//! whose answer is coming ([`LedgerWriter::expect`]). It commits as soon as every one of them has
//! queued its record, or after the linger (`RUNAII_LEDGER_LINGER_US`, about a millisecond) at most. A
//! record nobody else is expected beside — one client, or only streams in flight — is committed at once:
//! no timer is added where no group can form. It waits for two waves at most: the records expected
//! before the group began, then those expected while it waited for them. Under a steady stream of
//! arrivals some request is always on its way; waiting until none was held a group to the linger (and
//! tokio's millisecond timer rounds that up) whenever arrivals left no gap. A request is expected once
//! its worker's answer begins to arrive, and from the moment it is sent only when its model's recent
//! answers came within the linger ([`LedgerWriter::sent`]): a group can wait for an answer due in a
//! millisecond, not for one a model is still generating (expected from the send, a real model's seconds
//! held every other record to the linger). Measured at 16 closed-loop clients against an instant
//! worker, waiting halved the transactions per request (0.18 → 0.09) and cut Postgres' CPU per request
//! by a fifth, at some of one replica's throughput (the clients of a group wait in step while it
//! commits): Postgres' commits are what limit a fleet. Streams are not waited for: a stream's record
//! comes when its last token does.
//!
//! A group that fails (one bad record, or the database down) is retried one record at a time, so each
//! request gets its own answer and one bad record never takes the others with it.
//!
//! The writer keeps one connection across groups: checking one out of the pool for each group cost a
//! liveness round trip to Postgres every time (the pool's test before handing a connection out), about 4%
//! of the gateway's CPU under load and a round trip of latency on every commit. After any error the
//! connection goes back to the pool, whose test sees whether it still works, and the next group takes one
//! again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};

use crate::db::costs::{self, CostRecord, Settled};

/// Records in one transaction at most.
const MAX_GROUP: usize = 512;
/// Records waiting at most; past this, requests wait to queue theirs.
const QUEUE: usize = 8192;

struct Job {
    record: CostRecord,
    done: oneshot::Sender<Result<Settled, sqlx::Error>>,
}

/// The handle requests write through; cheap to clone.
#[derive(Debug, Clone)]
pub struct LedgerWriter {
    jobs: mpsc::Sender<Job>,
    /// Records on their way ([`Expected`] guards alive), by generation.
    expected: Arc<Expecting>,
    linger: Duration,
    /// Per model, how long its whole answers took lately (a moving average): whether a request just
    /// sent will answer within the linger.
    answer_times: Arc<Mutex<HashMap<String, Duration>>>,
}

/// The records on their way, counted in two generations: a guard counts in the generation current when
/// it was made, and a group starts a new one before each wave it waits for, so it waits only for the
/// guards made before that. A guard left over from a wave that stopped at the linger counts in the
/// generation after next, which then waits for it too: it is older, and the linger bounds the wait.
#[derive(Debug, Default)]
struct Expecting {
    generation: AtomicUsize,
    on_the_way: [AtomicUsize; 2],
}

impl Expecting {
    /// Starts a new generation; the counter of the one that ended, which the group's wave waits on.
    fn begin_wave(&self) -> &AtomicUsize {
        &self.on_the_way[self.generation.fetch_add(1, Ordering::Relaxed) % 2]
    }
}

/// A record that will be queued soon: the writer waits (up to its linger) for it while the guard lives.
/// Dropped just before the record is queued, or when the request ends without one of its own.
#[derive(Debug)]
#[must_use = "the writer waits for the record while the guard lives"]
pub struct Expected {
    expecting: Arc<Expecting>,
    generation: usize,
}

impl Drop for Expected {
    fn drop(&mut self) {
        self.expecting.on_the_way[self.generation].fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("request_id", &self.record.request_id).finish_non_exhaustive()
    }
}

impl LedgerWriter {
    /// Starts the writer; it ends when the last handle is dropped, after writing what was queued. It
    /// waits at most `linger` for expected records before a commit (zero: never).
    #[must_use]
    pub fn start(db: PgPool, linger: Duration) -> Self {
        let (jobs, queue) = mpsc::channel(QUEUE);
        let expected = Arc::new(Expecting::default());
        tokio::spawn(run(db, queue, Arc::clone(&expected), linger));
        Self { jobs, expected, linger, answer_times: Arc::default() }
    }

    /// Announces a record that will come soon (a non-streamed request whose answer is arriving): a
    /// group being formed waits for it while the guard lives.
    pub fn expect(&self) -> Expected {
        // A group that begins between the load and the add does not wait for this record: it came after.
        let generation = self.expected.generation.load(Ordering::Relaxed) % 2;
        self.expected.on_the_way[generation].fetch_add(1, Ordering::Relaxed);
        Expected { expecting: Arc::clone(&self.expected), generation }
    }

    /// A non-streamed request of `model` was just sent to its worker: expected already when the
    /// model's recent answers came within the linger, else only once its answer arrives.
    pub fn sent(&self, model: &str) -> Option<Expected> {
        let quick = self.answer_times.lock().unwrap_or_else(PoisonError::into_inner).get(model).is_some_and(|t| *t <= self.linger);
        quick.then(|| self.expect())
    }

    /// How long a whole answer of `model` took from its send: what [`Self::sent`] judges by.
    pub fn answered(&self, model: &str, took: Duration) {
        let mut times = self.answer_times.lock().unwrap_or_else(PoisonError::into_inner);
        match times.get_mut(model) {
            // An eighth of each new answer: a few slow answers do not stop the waiting, a slower model
            // stops it within some tens of answers.
            Some(average) => *average = (*average * 7 + took) / 8,
            None => {
                times.insert(model.to_owned(), took);
            }
        }
    }

    /// Writes the record (with its group) and settles its hold: what was charged, once it is durable.
    ///
    /// # Errors
    /// The database's error for this record; `PoolClosed` when the writer is gone.
    pub async fn settle(&self, record: CostRecord) -> Result<Settled, sqlx::Error> {
        let (done, answer) = oneshot::channel();
        self.jobs.send(Job { record, done }).await.map_err(|_| sqlx::Error::PoolClosed)?;
        answer.await.map_err(|_| sqlx::Error::PoolClosed)?
    }
}

async fn run(db: PgPool, mut queue: mpsc::Receiver<Job>, expected: Arc<Expecting>, linger: Duration) {
    let mut held: Option<PoolConnection<Postgres>> = None;
    while let Some(first) = queue.recv().await {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        gather(&mut queue, &mut group, &expected, linger).await;
        commit(&db, &mut held, group).await;
    }
}

/// Adds expected records to the group as they queue, in two waves: those expected before the group
/// began, then those expected while it waited for the first wave; it commits when both have queued, or
/// when `linger` has passed (tokio's timer rounds it up to its next millisecond). The second wave keeps
/// a closed loop's groups whole: its clients resend at about the same time, and the last of them are
/// sent just after the first record of the group queued. A third is not waited for: with requests
/// arriving steadily there is always one more on its way.
async fn gather(queue: &mut mpsc::Receiver<Job>, group: &mut Vec<Job>, expecting: &Expecting, linger: Duration) {
    if linger.is_zero() {
        return;
    }
    let mut wave = expecting.begin_wave();
    if wave.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut last_wave = false;
    let deadline = tokio::time::sleep(linger);
    tokio::pin!(deadline);
    let ended = loop {
        if wave.load(Ordering::Relaxed) == 0 {
            if last_wave {
                break "arrived";
            }
            (wave, last_wave) = (expecting.begin_wave(), true);
            continue;
        }
        if group.len() >= MAX_GROUP {
            break "full";
        }
        tokio::select! {
            biased;
            job = queue.recv() => match job {
                Some(job) => group.push(job),
                None => break "closed",
            },
            () = &mut deadline => break "linger",
        }
    };
    crate::metrics::global().ledger_waits.add(&[ended], 1);
}

/// Settles the records on the writer's connection, taking one when it has none; after an error the
/// connection goes back to the pool.
async fn settle_held(
    db: &PgPool,
    held: &mut Option<PoolConnection<Postgres>>,
    records: &[CostRecord],
) -> Result<Vec<Settled>, sqlx::Error> {
    let connection = match held {
        Some(connection) => connection,
        None => held.insert(db.acquire().await?),
    };
    let result = costs::settle_on(connection, records).await;
    if result.is_err() {
        *held = None;
    }
    result
}

async fn commit(db: &PgPool, held: &mut Option<PoolConnection<Postgres>>, group: Vec<Job>) {
    let records: Vec<CostRecord> = group.iter().map(|job| job.record.clone()).collect();
    let result = settle_held(db, held, &records).await;
    match result {
        Ok(settled) => {
            count("group", settled.len());
            for (job, s) in group.into_iter().zip(settled) {
                let _ = job.done.send(Ok(s));
            }
        }
        Err(e) if group.len() == 1 => {
            if let Some(job) = group.into_iter().next() {
                let _ = job.done.send(Err(e));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, records = group.len(), "a group of cost records failed; writing them one by one");
            for job in group {
                let alone = costs::settle(db, std::slice::from_ref(&job.record)).await;
                if alone.is_ok() {
                    count("one", 1);
                }
                let _ = job.done.send(alone.and_then(|mut s| s.pop().ok_or(sqlx::Error::RowNotFound)));
            }
        }
    }
}

fn count(kind: &str, records: usize) {
    let metrics = crate::metrics::global();
    metrics.ledger_commits.add(&[kind], 1);
    metrics.ledger_records.add(&[kind], records as u64);
}
