//! A full queue answers 503 with Retry-After, on a worker with one slot and a one-deep queue.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

#[tokio::test]
async fn full_queue_answers_503_with_retry_after() {
    let worker = common::start(&["--slots", "1", "--queue-depth", "1"]);
    let base = worker.url.clone();
    let long = runaii_testkit::long_answer_request(200, 300, false);
    let send = |base: String, long: serde_json::Value| {
        tokio::spawn(async move {
            let r = common::post_chat(&base, &long).send().await.unwrap();
            let retry_after = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
            let status = r.status().as_u16();
            let body: serde_json::Value = r.json().await.unwrap();
            (status, retry_after, body)
        })
    };
    // First occupy the only slot, so the race between admission and the next requests is settled.
    let mut tasks = vec![send(base.clone(), long.clone())];
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::get_json(&base, "/health").await["slots_busy"] != 1 {
        assert!(Instant::now() < deadline, "the first request never took the slot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tasks.extend((0..3).map(|_| send(base.clone(), long.clone())));
    let mut served = 0;
    let mut refused = 0;
    for t in tasks {
        let (status, retry_after, body) = t.await.unwrap();
        match status {
            200 => served += 1,
            503 => {
                refused += 1;
                assert_eq!(body["error"]["code"], "worker_overloaded");
                assert_eq!(retry_after.as_deref(), Some("1"));
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert!(served >= 2, "the running request and the queued one are served");
    assert!(refused >= 1, "a request past the queue is refused");
}
