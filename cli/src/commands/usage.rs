//! `runaii usage`: what `/v1/account` tells a key's holder — balance, reserved and available credit, this
//! month's use, rate limits — and, with an admin token holding the finance role, the tenant's recent
//! requests with their cost (the tenant API has no list of requests; the admin API's cost records do).

use chrono::{Duration, Utc};
use serde_json::{json, Value};

use super::Context;
use crate::args::{OutputFormat, UsageArgs};
use crate::error::CliError;
use crate::http::{Auth, GatewayError};
use crate::output::{self, Stdout};

/// Pages of cost records read at most, 1,000 each: "recent" is the end of that window.
const MAX_PAGES: usize = 20;

/// # Errors
/// The account's refusal or a transport failure. The recent requests are shown when they can be; their
/// failure is a note on stderr, not an error.
pub async fn show(context: &Context, args: &UsageArgs) -> Result<(), CliError> {
    let account: Value = context.gateway.get("/v1/account", Auth::Key).await?;
    let recent = if context.gateway.has_admin_token() && args.recent > 0 {
        match recent(context, &account, args).await {
            Ok(records) => Some(records),
            Err(e) => {
                eprintln!("runaii: recent requests unavailable: {e}");
                None
            }
        }
    } else {
        if args.recent > 0 && args.list.output == OutputFormat::Text {
            eprintln!("runaii: recent requests need an admin token with the finance role (--admin-token or RUNAII_ADMIN_TOKEN)");
        }
        None
    };
    if args.list.output == OutputFormat::Json {
        output::json(&json!({"account": account, "recent_requests": recent}));
        return Ok(());
    }
    let mut out = Stdout::default();
    out.write(&summary(&account));
    if let Some(records) = recent {
        out.write(&format!("\nrecent requests (last {} h, newest last):\n", args.since_hours));
        let rows: Vec<Vec<String>> = records.iter().map(record_row).collect();
        out.write(&output::table(&["TIME", "REQUEST", "MODEL", "STATUS", "TOKENS IN+OUT", "COST USD"], &rows));
    }
    Ok(())
}

/// The last `args.recent` cost records of the key's tenant within `args.since_hours`.
async fn recent(context: &Context, account: &Value, args: &UsageArgs) -> Result<Vec<Value>, GatewayError> {
    let tenant = account["tenant"]["id"].as_str().ok_or_else(|| GatewayError::Protocol("the account names no tenant id".into()))?;
    let from = (Utc::now() - Duration::hours(i64::from(args.since_hours))).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut records: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut path = format!("/admin/v1/cost-records?tenant_id={tenant}&from={from}&limit=1000");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={}", query_escape(c)));
        }
        let page: Value = context.gateway.get(&path, Auth::Admin).await?;
        records.extend(page["data"].as_array().cloned().unwrap_or_default());
        // Only the last ones are shown: keep memory bounded however busy the tenant is.
        let excess = records.len().saturating_sub(args.recent);
        records.drain(..excess);
        match page["next_cursor"].as_str() {
            Some(next) if page["has_more"] == true => cursor = Some(next.to_owned()),
            _ => break,
        }
    }
    Ok(records)
}

fn summary(account: &Value) -> String {
    let usage = &account["usage"];
    let limits = &account["rate_limits"];
    let lines = [
        ("tenant", format!("{} ({})", text(&account["tenant"]["name"]), text(&account["tenant"]["id"]))),
        (
            "balance",
            format!(
                "{} USD (reserved {}, available {})",
                money(&account["balance"]),
                money(&account["reserved"]),
                money(&account["available"])
            ),
        ),
        (
            "this month",
            format!(
                "{}: {} requests, {} input + {} output tokens, cost {} USD",
                text(&usage["month"]),
                text(&usage["requests"]),
                text(&usage["input_tokens"]),
                text(&usage["output_tokens"]),
                money(&usage["cost"])
            ),
        ),
        (
            "rate limits",
            format!("{} requests/min, {} tokens/min", text(&limits["requests_per_minute"]), text(&limits["tokens_per_minute"])),
        ),
    ];
    lines.iter().map(|(label, value)| format!("{label:<12}{value}\n")).collect()
}

fn record_row(r: &Value) -> Vec<String> {
    let status = match r["error_code"].as_str() {
        Some(code) => format!("{} ({code})", text(&r["status"])),
        None => text(&r["status"]),
    };
    vec![
        text(&r["created_at"]),
        text(&r["request_id"]),
        text(&r["model"]),
        status,
        format!("{}+{}", text(&r["input_tokens"]), text(&r["output_tokens"])),
        money(&r["cost"]),
    ]
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// A decimal string without the trailing zeros of its database scale (`0.0000259000000000` is
/// `0.0000259`): the same value, exactly.
fn money(v: &Value) -> String {
    let raw = text(v);
    raw.parse::<rust_decimal::Decimal>().map_or(raw, |d| d.normalize().to_string())
}

/// The cursor is `<micros>:<request id>`: escape what a query string cannot hold as is.
fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_lose_only_their_trailing_zeros() {
        assert_eq!(money(&json!("0.0000259000000000")), "0.0000259");
        assert_eq!(money(&json!("10")), "10");
        assert_eq!(money(&json!("n/a")), "n/a");
    }

    #[test]
    fn cursors_survive_the_query_string() {
        assert_eq!(query_escape("1733090000000000:chatcmpl-01 x+y"), "1733090000000000%3Achatcmpl-01%20x%2By");
    }
}
