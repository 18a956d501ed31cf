//! Recent request outcomes per model, for ops: how many requests each model served in the last minutes
//! and how many of them failed. Read from the cost records, so every replica's requests count, and a
//! gateway that restarted does not forget them.

use sqlx::PgPool;

/// One model's outcomes over the window.
#[derive(Debug, Clone)]
pub struct ModelOutcomes {
    pub model: String,
    pub requests: i64,
    /// The worker broke or went silent (`failed`): what an error rate is about.
    pub failed: i64,
    /// Refused before a token (a bad schema, a context too long): the request's fault, not the worker's.
    pub rejected: i64,
}

/// Outcomes per model of the records created in the last `seconds`.
///
/// # Errors
/// Database errors.
pub async fn recent(db: &PgPool, seconds: i64) -> Result<Vec<ModelOutcomes>, sqlx::Error> {
    // `!`: a count is never NULL, but a computed column's nullability is unknown to the macros.
    sqlx::query_as!(
        ModelOutcomes,
        r#"SELECT model, count(*) AS "requests!", count(*) FILTER (WHERE status = 'failed') AS "failed!",
                  count(*) FILTER (WHERE status = 'rejected') AS "rejected!"
           FROM cost_records WHERE created_at >= now() - make_interval(secs => $1)
           GROUP BY model ORDER BY model"#,
        seconds as f64,
    )
    .fetch_all(db)
    .await
}
