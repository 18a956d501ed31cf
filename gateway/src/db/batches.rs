//! Batches and their lines. Reads and a tenant's changes name the tenant; the runner's statements
//! (claiming work, recording answers) are every replica's and safe to run concurrently.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

/// A batch as its object shows it, with its lines counted and its cost summed.
#[derive(Debug, Clone)]
pub struct BatchRow {
    pub id: String,
    pub tenant_id: Uuid,
    pub api_key_id: Uuid,
    pub endpoint: String,
    pub input_file_id: String,
    pub completion_window: String,
    pub metadata: Option<Value>,
    pub status: String,
    pub errors: Option<Value>,
    pub output_file_id: Option<String>,
    pub error_file_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub in_progress_at: Option<DateTime<Utc>>,
    pub finalizing_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub failed_at: Option<DateTime<Utc>>,
    pub expired_at: Option<DateTime<Utc>>,
    pub cancelling_at: Option<DateTime<Utc>>,
    pub cancelled_at: Option<DateTime<Utc>>,
    pub total: i64,
    pub completed: i64,
    pub failed: i64,
    pub input_tokens: i64,
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub cost: Decimal,
}

/// A new batch, `validating`.
#[derive(Debug)]
pub struct NewBatch<'a> {
    pub id: &'a str,
    pub tenant: Uuid,
    pub api_key_id: Uuid,
    pub endpoint: &'a str,
    pub input_file_id: &'a str,
    pub completion_window: &'a str,
    pub metadata: Option<&'a Value>,
    pub window_s: f64,
}

/// # Errors
/// Database errors.
pub async fn insert(db: &PgPool, new: &NewBatch<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO batches (id, tenant_id, api_key_id, endpoint, input_file_id, completion_window, metadata, status, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'validating', now() + make_interval(secs => $8))",
        new.id,
        new.tenant,
        new.api_key_id,
        new.endpoint,
        new.input_file_id,
        new.completion_window,
        new.metadata,
        new.window_s,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Which batches [`select`] reads.
#[derive(Debug, Clone, Copy)]
pub enum Pick<'a> {
    /// Batch `id`, the tenant's (any tenant's with `tenant` `None`: the runner's).
    One { tenant: Option<Uuid>, id: &'a str },
    /// Up to `limit` of the tenant's batches, newest first, after the batch `after` when given.
    Page { tenant: Uuid, after: Option<(DateTime<Utc>, &'a str)>, limit: i64 },
}

/// The batch `id` of `tenant` (any tenant's with `tenant` `None`: the runner's).
///
/// # Errors
/// Database errors.
pub async fn get(db: &PgPool, tenant: Option<Uuid>, id: &str) -> Result<Option<BatchRow>, sqlx::Error> {
    Ok(select(db, Pick::One { tenant, id }).await?.pop())
}

/// The batches `pick` names, newest first, each with its lines counted and its cost summed: one statement
/// for the whole page.
///
/// # Errors
/// Database errors.
pub async fn select(db: &PgPool, pick: Pick<'_>) -> Result<Vec<BatchRow>, sqlx::Error> {
    let (id, tenant, after, limit) = match pick {
        Pick::One { tenant, id } => (Some(id), tenant, None, 1),
        Pick::Page { tenant, after, limit } => (None, Some(tenant), after, limit),
    };
    let (after_at, after_id) = after.unzip();
    sqlx::query_as!(
        BatchRow,
        r#"WITH chosen AS (
               SELECT * FROM batches
               WHERE ($1::text IS NULL OR id = $1) AND ($2::uuid IS NULL OR tenant_id = $2)
                 AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4::text))
               ORDER BY created_at DESC, id DESC LIMIT $5)
           SELECT b.id, b.tenant_id, b.api_key_id, b.endpoint, b.input_file_id, b.completion_window, b.metadata, b.status,
                  b.errors, b.output_file_id, b.error_file_id, b.created_at, b.expires_at, b.in_progress_at, b.finalizing_at,
                  b.completed_at, b.failed_at, b.expired_at, b.cancelling_at, b.cancelled_at,
                  n.total AS "total!", n.completed AS "completed!", n.failed AS "failed!",
                  n.input_tokens AS "input_tokens!", n.cached_tokens AS "cached_tokens!",
                  n.output_tokens AS "output_tokens!", n.cost AS "cost!"
           FROM chosen b
           CROSS JOIN LATERAL (
               SELECT count(l.line) AS total,
                      count(l.line) FILTER (WHERE l.state = 'succeeded') AS completed,
                      count(l.line) FILTER (WHERE l.state = 'failed') AS failed,
                      COALESCE(sum(c.input_tokens), 0)::int8 AS input_tokens,
                      COALESCE(sum(c.cached_tokens), 0)::int8 AS cached_tokens,
                      COALESCE(sum(c.output_tokens), 0)::int8 AS output_tokens,
                      COALESCE(sum(c.cost), 0) AS cost
               FROM batch_lines l LEFT JOIN cost_records c ON c.request_id = l.request_id
               WHERE l.batch_id = b.id) n
           ORDER BY b.created_at DESC, b.id DESC"#,
        id,
        tenant,
        after_at,
        after_id,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Asks to cancel the tenant's batch `id`: a validating or running one becomes `cancelling` and its lines
/// not yet begun `cancelled`; whether it changed.
///
/// # Errors
/// Database errors.
pub async fn cancel(db: &PgPool, tenant: Uuid, id: &str) -> Result<bool, sqlx::Error> {
    let mut tx = db.begin().await?;
    let changed = sqlx::query!(
        "UPDATE batches SET status = 'cancelling', cancelling_at = now()
         WHERE id = $1 AND tenant_id = $2 AND status IN ('validating', 'in_progress')",
        id,
        tenant,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query!("UPDATE batch_lines SET state = 'cancelled' WHERE batch_id = $1 AND state = 'pending'", id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(changed.rows_affected() > 0)
}

/// A batch one replica took to validate or finalize, until `until`: that time names the lease, so a
/// replica whose lease another has since taken over changes nothing with it.
#[derive(Debug, Clone)]
pub struct Lease {
    pub id: String,
    pub until: DateTime<Utc>,
}

/// Takes the next batch in `status` (`validating` or `finalizing`) that no live replica is working on,
/// for `lease_s`.
///
/// # Errors
/// Database errors.
pub async fn lease(db: &PgPool, status: &str, lease_s: f64) -> Result<Option<Lease>, sqlx::Error> {
    sqlx::query_as!(
        Lease,
        r#"UPDATE batches SET leased_until = now() + make_interval(secs => $2)
           WHERE id = (SELECT id FROM batches WHERE status = $1 AND (leased_until IS NULL OR leased_until < now())
                       ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
           RETURNING id, leased_until AS "until!""#,
        status,
        lease_s,
    )
    .fetch_optional(db)
    .await
}

/// Gives `lease` back after a failed try: any replica may take its batch again after `retry_s`. Whether
/// the lease was still this one's.
///
/// # Errors
/// Database errors.
pub async fn release(db: &PgPool, lease: &Lease, retry_s: f64) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE batches SET leased_until = now() + make_interval(secs => $3) WHERE id = $1 AND leased_until = $2",
        lease.id,
        lease.until,
        retry_s,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// A line as validation read it.
#[derive(Debug)]
pub struct NewLine {
    pub custom_id: String,
    pub request_id: String,
    pub body: Value,
    /// The most tokens it may use: its prompt's bound and its `max_tokens`.
    pub tokens: i64,
}

/// What starting a batch came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Started,
    /// No longer validating (cancelled meanwhile): nothing written.
    NotValidating,
    /// The tenant's unfinished batches already hold this many enqueued tokens: with this one's they would
    /// pass the limit. Nothing written.
    OverLimit(i64),
}

/// Starts the validating batch `id` of `tenant` with its lines and the tokens they may use, unless the
/// tenant's unfinished batches would then hold more than `max_enqueued` (checked under a lock per tenant,
/// so two batches validated at once cannot pass it together).
///
/// # Errors
/// Database errors.
pub async fn start(
    db: &PgPool,
    (id, tenant): (&str, Uuid),
    lines: &[NewLine],
    (enqueued, max_enqueued): (i64, i64),
) -> Result<Start, sqlx::Error> {
    let mut tx = db.begin().await?;
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtextextended('batches:' || $1::uuid::text, 0))", tenant).execute(&mut *tx).await?;
    let held = sqlx::query_scalar!(
        r#"SELECT COALESCE(sum(enqueued_tokens), 0)::int8 AS "held!" FROM batches
           WHERE tenant_id = $1 AND status IN ('in_progress', 'finalizing', 'cancelling')"#,
        tenant
    )
    .fetch_one(&mut *tx)
    .await?;
    if held.saturating_add(enqueued) > max_enqueued {
        return Ok(Start::OverLimit(held));
    }
    let started = sqlx::query!(
        "UPDATE batches SET status = 'in_progress', in_progress_at = now(), leased_until = NULL, enqueued_tokens = $2
         WHERE id = $1 AND status = 'validating'",
        id,
        enqueued,
    )
    .execute(&mut *tx)
    .await?;
    if started.rows_affected() == 0 {
        return Ok(Start::NotValidating);
    }
    for (n, chunk) in lines.chunks(1000).enumerate() {
        let first = n * 1000;
        let numbers: Vec<i32> = (first..first + chunk.len()).map(|i| i32::try_from(i).unwrap_or(i32::MAX)).collect();
        let custom_ids: Vec<String> = chunk.iter().map(|l| l.custom_id.clone()).collect();
        let request_ids: Vec<String> = chunk.iter().map(|l| l.request_id.clone()).collect();
        // As text, into a `json` column: the body keeps its keys in the order the client wrote them.
        let bodies: Vec<String> = chunk.iter().map(|l| l.body.to_string()).collect();
        sqlx::query!(
            "INSERT INTO batch_lines (batch_id, line, custom_id, request_id, body, state)
             SELECT $1::text, u.n, u.c, u.r, u.b::json, 'pending' FROM UNNEST($2::int4[], $3::text[], $4::text[], $5::text[]) AS u(n, c, r, b)",
            id,
            &numbers,
            &custom_ids,
            &request_ids,
            &bodies,
        )
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(Start::Started)
}

/// Fails the validating batch `id` with OpenAI's `errors` object.
///
/// # Errors
/// Database errors.
pub async fn fail(db: &PgPool, id: &str, errors: &Value) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE batches SET status = 'failed', failed_at = now(), errors = $2, leased_until = NULL WHERE id = $1 AND status = 'validating'",
        id,
        errors,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A line claimed to run.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub batch_id: String,
    pub line: i32,
    pub request_id: String,
    pub body: Value,
    pub api_key_id: Uuid,
    pub endpoint: String,
    /// This try's number, from 1.
    pub attempts: i32,
}

/// Claims the first pending line of the running batch whose turn it is, for `replica`: the tenant whose
/// batches were claimed from longest ago goes first, then its batch claimed from longest ago. Turns are
/// the tenants': a tenant with ten batches gets no more turns than one with a single batch.
///
/// # Errors
/// Database errors.
pub async fn claim(db: &PgPool, replica: Uuid) -> Result<Option<Claimed>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let batch = sqlx::query!(
        "SELECT id, api_key_id, endpoint FROM batches b
         WHERE status = 'in_progress' AND expires_at > now()
           AND EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.state = 'pending'
                       AND (l.not_before IS NULL OR l.not_before <= now()))
         ORDER BY (SELECT max(o.last_claim_at) FROM batches o WHERE o.tenant_id = b.tenant_id) NULLS FIRST,
                  last_claim_at NULLS FIRST, created_at
         LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(batch) = batch else {
        return Ok(None);
    };
    let line = sqlx::query!(
        "UPDATE batch_lines SET state = 'running', claimed_by = $2, claimed_at = now(), attempts = attempts + 1
         WHERE (batch_id, line) = (SELECT batch_id, line FROM batch_lines WHERE batch_id = $1 AND state = 'pending'
                                     AND (not_before IS NULL OR not_before <= now())
                                   ORDER BY line LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING line, request_id, body, attempts",
        batch.id,
        replica,
    )
    .fetch_optional(&mut *tx)
    .await?;
    sqlx::query!("UPDATE batches SET last_claim_at = clock_timestamp() WHERE id = $1", batch.id).execute(&mut *tx).await?;
    tx.commit().await?;
    Ok(line.map(|l| Claimed {
        batch_id: batch.id,
        line: l.line,
        request_id: l.request_id,
        body: l.body,
        api_key_id: batch.api_key_id,
        endpoint: batch.endpoint,
        attempts: l.attempts,
    }))
}

/// Records a line's answer, if `replica` still runs it.
///
/// # Errors
/// Database errors.
pub async fn answer(db: &PgPool, (batch, line): (&str, i32), replica: Uuid, status_code: u16, response: &str) -> Result<(), sqlx::Error> {
    let state = if (200..300).contains(&status_code) { "succeeded" } else { "failed" };
    sqlx::query!(
        "UPDATE batch_lines SET state = $4, status_code = $5, response = $6
         WHERE batch_id = $1 AND line = $2 AND state = 'running' AND claimed_by = $3",
        batch,
        line,
        replica,
        state,
        i32::from(status_code),
        response,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Puts a line `replica` runs back to pending under a new request id, not to be claimed for `after_s`.
///
/// # Errors
/// Database errors.
pub async fn retry(db: &PgPool, (batch, line): (&str, i32), replica: Uuid, request_id: &str, after_s: f64) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE batch_lines SET state = 'pending', claimed_by = NULL, request_id = $4, not_before = now() + make_interval(secs => $5)
         WHERE batch_id = $1 AND line = $2 AND state = 'running' AND claimed_by = $3",
        batch,
        line,
        replica,
        request_id,
        after_s,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Whether request `request_id` has its cost record.
///
/// # Errors
/// Database errors.
pub async fn billed(db: &PgPool, request_id: &str) -> Result<bool, sqlx::Error> {
    let found = sqlx::query_scalar!("SELECT 1 AS one FROM cost_records WHERE request_id = $1", request_id).fetch_optional(db).await?;
    Ok(found.is_some())
}

/// Lines left running by replicas not heard from for `timeout_s`: a line whose cost record exists ran
/// to its end and is not run again (its answer was lost with its replica: it fails, billed once); any
/// other goes back to pending. How many.
///
/// # Errors
/// Database errors.
pub async fn recover(db: &PgPool, timeout_s: f64, lost: &str) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE batch_lines l
         SET state = CASE WHEN c.request_id IS NULL THEN 'pending' ELSE 'failed' END,
             status_code = CASE WHEN c.request_id IS NULL THEN NULL ELSE 500 END,
             response = CASE WHEN c.request_id IS NULL THEN NULL ELSE $2 END,
             claimed_by = NULL
         FROM batch_lines l2 LEFT JOIN cost_records c ON c.request_id = l2.request_id
         WHERE l.batch_id = l2.batch_id AND l.line = l2.line AND l.state = 'running'
           AND NOT EXISTS (SELECT 1 FROM gateway_replicas r WHERE r.id = l.claimed_by
                           AND r.last_seen > now() - make_interval(secs => $1))",
        timeout_s,
        lost,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Running batches past their window: their lines not begun expire. How many lines.
///
/// # Errors
/// Database errors.
pub async fn expire_lines(db: &PgPool) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE batch_lines SET state = 'expired'
         WHERE state = 'pending' AND batch_id IN (SELECT id FROM batches WHERE status = 'in_progress' AND expires_at <= now())"
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Cancelling batches' pending lines are cancelled: those a cancel found pending, and those that became
/// pending after it (a line whose worker was busy, put back to wait; a line taken back from a replica
/// that died), which no runner would claim in a batch no longer running. Then running or cancelling
/// batches with no line pending or running: `finalizing`. Validating ones past their window: `expired`.
/// How many batches changed.
///
/// # Errors
/// Database errors.
pub async fn settle(db: &PgPool) -> Result<u64, sqlx::Error> {
    sqlx::query!(
        "UPDATE batch_lines SET state = 'cancelled'
         WHERE state = 'pending' AND batch_id IN (SELECT id FROM batches WHERE status = 'cancelling')"
    )
    .execute(db)
    .await?;
    let finishing = sqlx::query!(
        "UPDATE batches b SET status = 'finalizing', finalizing_at = now(), leased_until = NULL
         WHERE status IN ('in_progress', 'cancelling')
           AND NOT EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.state IN ('pending', 'running'))"
    )
    .execute(db)
    .await?;
    let expired = sqlx::query!(
        "UPDATE batches SET status = 'expired', expired_at = now(), leased_until = NULL
         WHERE status = 'validating' AND expires_at <= now()"
    )
    .execute(db)
    .await?;
    Ok(finishing.rows_affected() + expired.rows_affected())
}

/// A finished line, as the output and error files show it.
#[derive(Debug)]
pub struct Finished {
    pub line: i32,
    pub custom_id: String,
    pub request_id: String,
    pub state: String,
    pub status_code: Option<i32>,
    pub response: Option<String>,
}

/// Up to `limit` lines of batch `id` after line `after`, in order.
///
/// # Errors
/// Database errors.
pub async fn lines(db: &PgPool, id: &str, after: i32, limit: i64) -> Result<Vec<Finished>, sqlx::Error> {
    sqlx::query_as!(
        Finished,
        "SELECT line, custom_id, request_id, state, status_code, response FROM batch_lines
         WHERE batch_id = $1 AND line > $2 ORDER BY line LIMIT $3",
        id,
        after,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Ends the finalizing batch of `lease` in `status` (`completed`, `expired` or `cancelled`) with its files,
/// if the lease is still this one's: whether it ended it.
///
/// # Errors
/// Database errors.
pub async fn finish(
    db: &PgPool,
    lease: &Lease,
    status: &str,
    output_file_id: Option<&str>,
    error_file_id: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE batches SET status = $3, output_file_id = $4, error_file_id = $5, leased_until = NULL,
             completed_at = CASE WHEN $3 = 'completed' THEN now() END,
             expired_at = CASE WHEN $3 = 'expired' THEN now() END,
             cancelled_at = CASE WHEN $3 = 'cancelled' THEN now() END
         WHERE id = $1 AND status = 'finalizing' AND leased_until = $2",
        lease.id,
        lease.until,
        status,
        output_file_id,
        error_file_id,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() > 0)
}
