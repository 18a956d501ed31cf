//! One writer per replica commits cost records in groups: it takes whatever is queued, writes it in one
//! transaction (one WAL flush however many records), answers each request, and starts on what queued
//! meanwhile. Nothing waits on a timer: alone, a record is committed at once; under load, a group forms
//! while the previous one commits. A request still answers only after its own record is durable.
//!
//! A group that fails (one bad record, or the database down) is retried one record at a time, so each
//! request gets its own answer and one bad record never takes the others with it.
//!
//! The writer keeps one connection across groups: checking one out of the pool for each group cost a
//! liveness round trip to Postgres every time (the pool's test before handing a connection out), about 4%
//! of the gateway's CPU under load and a round trip of latency on every commit. After any error the
//! connection goes back to the pool, whose test sees whether it still works, and the next group takes one
//! again.

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
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job").field("request_id", &self.record.request_id).finish_non_exhaustive()
    }
}

impl LedgerWriter {
    /// Starts the writer; it ends when the last handle is dropped, after writing what was queued.
    #[must_use]
    pub fn start(db: PgPool) -> Self {
        let (jobs, queue) = mpsc::channel(QUEUE);
        tokio::spawn(run(db, queue));
        Self { jobs }
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

async fn run(db: PgPool, mut queue: mpsc::Receiver<Job>) {
    let mut held: Option<PoolConnection<Postgres>> = None;
    while let Some(first) = queue.recv().await {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        commit(&db, &mut held, group).await;
    }
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
