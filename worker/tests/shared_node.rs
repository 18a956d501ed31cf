//! A worker on a shared node: while another process spins on a core the decoding threads need, the
//! worker decodes on one thread, and on all of them again once it stops; its answers stay the same.
//! (How much faster one thread is under load is measured by `scripts/bench-threads.sh`, not asserted here.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{invoice_request, metric, metric_f64, post};
use serde_json::Value;

/// Other processes' CPU as the worker reports it, in cores.
async fn others(base: &str) -> f64 {
    metric_f64(base, "runaii_worker_other_processes_cpu_cores").await
}

/// Sends requests until the worker reports `threads` (the switch is applied before a decode), or panics
/// after `within`. Returns the last answer.
async fn answer_with_threads(base: &str, threads: u64, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = post(base, &invoice_request()).await;
        assert_eq!(status, 200, "{body}");
        if metric(base, "runaii_worker_decode_threads").await == threads {
            // This answer may have started on the other count: one more, wholly on `threads`.
            let (status, body) = post(base, &invoice_request()).await;
            assert_eq!(status, 200, "{body}");
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "the worker did not decode on {threads} thread(s) within {within:?}; others use {} cores",
            others(base).await
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn content(body: &Value) -> &str {
    body["choices"][0]["message"]["content"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_neighbour_takes_the_worker_to_one_thread_and_back() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(cpus >= 2, "this test needs two CPUs to share (found {cpus})");
    // As many decoding threads as CPUs: any neighbour's work competes with them.
    let worker = common::start(&["--threads", &cpus.to_string()]);
    let base = &worker.url;
    let all = u64::try_from(cpus).unwrap();

    // Quiet: every thread.
    let quiet = answer_with_threads(base, all, Duration::from_secs(60)).await;
    let switches = metric(base, "runaii_worker_decode_thread_switches_total").await;

    // A neighbour spinning on one core (a thread of this test process, which is not the worker).
    let spinning = Arc::new(AtomicBool::new(true));
    let spinner = {
        let spinning = Arc::clone(&spinning);
        std::thread::spawn(move || {
            let mut n = 0u64;
            while spinning.load(Ordering::Relaxed) {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        })
    };
    let busy = answer_with_threads(base, 1, Duration::from_secs(30)).await;
    assert!(others(base).await > 0.5, "the worker saw the neighbour");

    // The neighbour leaves: every thread again.
    spinning.store(false, Ordering::Relaxed);
    spinner.join().unwrap();
    let after = answer_with_threads(base, all, Duration::from_secs(30)).await;
    assert!(metric(base, "runaii_worker_decode_thread_switches_total").await >= switches + 2);

    // The thread count decides speed, never the answer.
    assert_eq!(content(&busy), content(&quiet));
    assert_eq!(content(&after), content(&quiet));
}
