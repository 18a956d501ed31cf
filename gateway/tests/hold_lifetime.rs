//! A credit hold lives as long as its request: a running stream renews its exact hold, so the backstop
//! that releases the holds of dead gateways (`--hold-expiry-s`) never releases a live one; and a request
//! that runs past the longest a request may (`--max-request-s`) is ended, billed, and its hold released.
//! Run with a hold expiry of 2 s and a longest request of 6 s, against the real worker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{client, spawn_app_with};
use futures::StreamExt as _;
use runaii_testkit::{long_answer_request, sse_data};
use rust_decimal::Decimal;
use serde_json::Value;

#[tokio::test]
async fn a_live_stream_keeps_its_hold_and_one_past_the_longest_time_is_ended_and_billed() {
    let app = spawn_app_with(|s| {
        s.limits.hold_expiry_s = 2;
        s.limits.max_request_s = 6;
    })
    .await;
    // Thousands of tokens: far longer than 6 s on this worker.
    let body = long_answer_request(1500, 3000, true);
    let started = Instant::now();
    let response = client().post(format!("{}/v1/chat/completions", app.base)).bearer_auth(&app.key).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let request_id = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    let reader = tokio::spawn(async move {
        let mut text = String::new();
        let mut stream = response.bytes_stream();
        while let Some(Ok(piece)) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&piece));
        }
        text
    });

    // Until the request is recorded, its hold is there: the first request of a tenant holds exactly, a
    // row of its own, which housekeeping (every second here) would release after 2 s unless renewed.
    let mut checks = 0;
    loop {
        let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM cost_records WHERE request_id = $1")
            .bind(&request_id)
            .fetch_one(&app.db)
            .await
            .unwrap();
        if recorded == 1 {
            break;
        }
        let held: i64 = sqlx::query_scalar("SELECT count(*) FROM credit_holds WHERE request_id = $1")
            .bind(&request_id)
            .fetch_one(&app.db)
            .await
            .unwrap();
        assert_eq!(held, 1, "the hold of a running stream was released after {:?}", started.elapsed());
        checks += 1;
        assert!(started.elapsed() < Duration::from_secs(30), "the stream was not ended at 6 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let ended = started.elapsed();
    assert!(checks > 20 && ended >= Duration::from_secs(6), "ended after {ended:?}: the stream should have outlived the hold expiry");
    assert!(ended < Duration::from_secs(12), "ended after {ended:?}, long past the longest a request may run");

    // Ended and billed: the client told why, the record names it, the work is charged and nothing held.
    let text = reader.await.unwrap();
    let last: Value = serde_json::from_str(sse_data(&text).last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "max_duration_exceeded", "{last}");
    let (status, code, output, cost, shortfall): (String, Option<String>, i32, Decimal, Decimal) =
        sqlx::query_as("SELECT status, error_code, output_tokens, cost, shortfall FROM cost_records WHERE request_id = $1")
            .bind(&request_id)
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!((status.as_str(), code.as_deref()), ("cancelled", Some("max_duration_exceeded")));
    assert!(output > 0 && cost > Decimal::ZERO, "billed for the work done: {output} tokens, {cost}");
    assert_eq!(shortfall, Decimal::ZERO, "the hold covered it: it was never released");
    let holds: i64 =
        sqlx::query_scalar("SELECT count(*) FROM credit_holds WHERE tenant_id = $1").bind(app.tenant_id).fetch_one(&app.db).await.unwrap();
    assert_eq!(holds, 0);
}
