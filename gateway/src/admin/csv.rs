//! The CSV export of cost records, streamed: one page of records (keyset pagination) is read, written to
//! the response and dropped before the next is read, so an export of millions of records holds one page in
//! memory, and a client that goes away stops the queries (the stream is dropped with the connection).
//!
//! Pages are separate queries, not one long transaction: a record that settles during an export appears
//! in it if it sorts after the page being read. A closed month never changes, so its export is exact.

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use sqlx::PgPool;

use crate::db::reports::{self, CostFilter, CostRow};
use crate::error::ApiError;

/// Rows per query while exporting.
const EXPORT_PAGE: i64 = 1000;

const CSV_HEADER: &str = "request_id,created_at,tenant_id,api_key_id,model,endpoint,status,http_status,error_code,input_tokens,cached_tokens,output_tokens,cost,shortfall,latency_ms,batch_id\n";

/// Where the export stands between two pages.
enum Cursor {
    /// The first page, read before answering, still to be written (with the header).
    First(Vec<CostRow>),
    /// Read the page after the filter's `after`.
    Next,
    Done,
}

/// Every record matching `filter`, oldest first, as a streamed `text/csv` body.
///
/// # Errors
/// Database errors on the first page: a database that is down answers 503, not a cut-off file. A failure
/// on a later page breaks the connection (the body ends without its final chunk), so a client never
/// mistakes a partial export for a whole one.
pub(super) async fn export(db: PgPool, filter: CostFilter) -> Result<Response, ApiError> {
    let first = reports::cost_records(&db, &filter, EXPORT_PAGE).await?;
    let pages = futures::stream::try_unfold((db, filter, Cursor::First(first)), |(db, mut filter, cursor)| async move {
        let (rows, mut out) = match cursor {
            Cursor::Done => return Ok(None),
            Cursor::First(rows) => (rows, String::from(CSV_HEADER)),
            Cursor::Next => {
                let rows = reports::cost_records(&db, &filter, EXPORT_PAGE).await.inspect_err(|e| {
                    tracing::error!(error = %e, "cost record export cut off");
                })?;
                if rows.is_empty() {
                    return Ok(None);
                }
                (rows, String::new())
            }
        };
        for row in &rows {
            line(&mut out, row);
        }
        let next = match rows.last() {
            Some(last) if rows.len() as i64 == EXPORT_PAGE => {
                filter.after = Some((last.created_at, last.request_id.clone()));
                Cursor::Next
            }
            _ => Cursor::Done,
        };
        Ok::<_, sqlx::Error>(Some((Bytes::from(out), (db, filter, next))))
    });
    let disposition = "attachment; filename=\"cost-records.csv\"";
    let headers = [(header::CONTENT_TYPE, "text/csv; charset=utf-8"), (header::CONTENT_DISPOSITION, disposition)];
    Ok((headers, Body::from_stream(pages)).into_response())
}

fn line(out: &mut String, r: &CostRow) {
    let fields = [
        field(&r.request_id),
        r.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        r.tenant_id.to_string(),
        r.api_key_id.to_string(),
        field(&r.model),
        field(&r.endpoint),
        field(&r.status),
        r.http_status.to_string(),
        field(r.error_code.as_deref().unwrap_or("")),
        r.input_tokens.to_string(),
        r.cached_tokens.to_string(),
        r.output_tokens.to_string(),
        r.cost.normalize().to_string(),
        r.shortfall.normalize().to_string(),
        r.latency_ms.to_string(),
        field(r.batch_id.as_deref().unwrap_or("")),
    ];
    out.push_str(&fields.join(","));
    out.push('\n');
}

/// RFC 4180 quoting, and a leading `'` for text a spreadsheet would run as a formula.
fn field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@']) { format!("'{text}") } else { text.to_owned() };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_and_defused() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=SUM(A1)"), "'=SUM(A1)");
    }
}
