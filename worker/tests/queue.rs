//! A full queue answers 503 with Retry-After, on a worker with one slot and a one-deep queue; batch jobs
//! leave a sequence free for online work and sit out while it decodes.

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

#[tokio::test]
async fn batch_jobs_leave_a_sequence_free_and_sit_out_while_an_online_answer_decodes() {
    use futures::StreamExt as _;
    let worker = common::start(&["--slots", "3"]);
    let base = worker.url.clone();
    let url = format!("{base}/v1/chat/completions");
    let batch_body = serde_json::to_vec(&runaii_testkit::long_answer_request(400, 1500, true)).unwrap();
    let batch_headers = [(runaii_wire::priority::HEADER, "batch")];
    // Every chunk the batch streams deliver, with when it arrived.
    let (chunks, mut arrived) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let streams: Vec<_> = (0..3)
        .map(|_| {
            let (url, body, chunks) = (url.clone(), batch_body.clone(), chunks.clone());
            tokio::spawn(async move {
                let response = common::signed_post(&url, &batch_headers, body).send().await.unwrap();
                assert_eq!(response.status(), 200);
                let mut body = response.bytes_stream();
                while let Some(Ok(bytes)) = body.next().await {
                    for _ in 0..bytes.windows(6).filter(|w| w == b"data: ").count() {
                        let _ = chunks.send(Instant::now());
                    }
                }
            })
        })
        .collect();
    // Three batch jobs, three sequences: two run, one waits, the last sequence stays free.
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::get_json(&base, "/health").await["slots_busy"] != 2 {
        assert!(Instant::now() < deadline, "the batch jobs never took two sequences");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(common::get_json(&base, "/health").await["slots_busy"], 2, "a batch job took the last free sequence");

    // An online answer of exactly 60 tokens (the schema wants 400 items) starts at once and decodes alone.
    let started = Instant::now();
    let (status, answer) = common::post(&base, &runaii_testkit::long_answer_request(400, 60, false)).await;
    let ended = Instant::now();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["usage"]["completion_tokens"], 60, "{answer}");
    drop(chunks);
    for stream in &streams {
        stream.abort();
    }
    let mut during = 0;
    while let Some(at) = arrived.recv().await {
        if at > started && at < ended {
            during += 1;
        }
    }
    // Decoding beside them, the two batch streams would have sent about 60 chunks each.
    assert!(during <= 15, "the batch streams sent {during} chunks while the online answer decoded");
}
