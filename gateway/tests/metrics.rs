//! `/metrics`: what a scrape shows after real requests, and that the cost it reports is the ledger's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{client, invoice_request, spawn_app, MODEL};
use futures::StreamExt;
use rust_decimal::Decimal;
use serde_json::json;

/// The value of the sample `name{labels}` in a scrape.
fn sample(scrape: &str, series: &str) -> Option<String> {
    scrape.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ').map(str::to_owned))
}

fn number(scrape: &str, series: &str) -> u64 {
    sample(scrape, series).unwrap_or_else(|| panic!("{series} missing from:\n{scrape}")).parse().unwrap()
}

// One test in this binary: the registry is per process, so the sums below are this test's alone.
#[tokio::test]
async fn a_scrape_counts_requests_tokens_latencies_refusals_and_the_exact_cost() {
    let app = spawn_app().await;
    let (status, body, _) = app.post_json("/v1/chat/completions", &invoice_request()).await;
    assert_eq!(status, 200, "{body}");

    let mut streamed = invoice_request();
    streamed["stream"] = json!(true);
    let response = client().post(format!("{}/v1/chat/completions", app.base)).bearer_auth(&app.key).json(&streamed).send().await.unwrap();
    let mut chunks = response.bytes_stream();
    while chunks.next().await.is_some() {}

    let mut bomb = invoice_request();
    bomb["response_format"]["json_schema"]["schema"] = json!({"type": "array", "minItems": 1_000_000_000});
    let (status, _, _) = app.post_json("/v1/chat/completions", &bomb).await;
    assert_eq!(status, 400);

    let finance = common::admin_token(&["finance"], None);
    let scrape = client().get(format!("{}/metrics", app.base)).bearer_auth(&finance).send().await.unwrap().text().await.unwrap();
    let model = format!("model=\"{MODEL}\"");
    assert_eq!(number(&scrape, &format!("runaii_gateway_requests_total{{endpoint=\"chat.completions\",{model},status=\"succeeded\"}}")), 2);
    assert_eq!(number(&scrape, "runaii_gateway_http_responses_total{route=\"/v1/chat/completions\",code=\"200\"}"), 2);
    assert_eq!(number(&scrape, "runaii_gateway_http_responses_total{route=\"/v1/chat/completions\",code=\"400\"}"), 1);
    assert_eq!(number(&scrape, "runaii_gateway_schema_refusals_total{reason=\"schema_too_complex\"}"), 1);
    assert_eq!(number(&scrape, &format!("runaii_gateway_time_to_first_token_seconds_count{{{model}}}")), 1, "the stream's");
    assert_eq!(number(&scrape, &format!("runaii_gateway_time_per_output_token_seconds_count{{{model}}}")), 2);
    assert_eq!(number(&scrape, "runaii_gateway_overhead_seconds_count{endpoint=\"chat.completions\"}"), 2);
    assert!(number(&scrape, &format!("runaii_gateway_ready_workers{{{model}}}")) >= 1);

    let rows = app.cost_rows().await;
    let output: i32 = rows.iter().map(|r| r.3).sum();
    assert_eq!(number(&scrape, &format!("runaii_gateway_tokens_total{{{model},kind=\"output\"}}")), u64::try_from(output).unwrap());
    let cost: Decimal = sample(&scrape, &format!("runaii_gateway_cost_usd_total{{{model}}}")).unwrap().parse().unwrap();
    assert_eq!(cost, rows.iter().map(|r| r.4).sum::<Decimal>(), "the metric is the ledger's exact sum");

    let worker = client().get(format!("{}/metrics", common::worker().url)).send().await.unwrap().text().await.unwrap();
    assert!(number(&worker, "runaii_worker_time_to_first_token_seconds_count") >= 2, "{worker}");
    assert!(number(&worker, "runaii_worker_request_seconds_count") >= 2);
}
