//! Prompt caching benchmark: time to first token of a request whose long prefix (a system prompt of
//! over 1,000 tokens) no sequence holds, against the next request sharing that prefix, and against one
//! sharing it after as many other prompts as the worker has sequences took every sequence (the prefix
//! then comes back from host memory, `--prompt-cache-mib`, or is read again with `--prompt-cache-mib 0`).
//!
//! Starts its own worker (the debug or release binary beside this example) with the test secret, so build
//! the worker first:
//!
//! ```text
//! cargo build --workspace && cargo run --workspace --example prefix_cache -- --rounds 3
//! ```
//!
//! Time to first token is the worker's own: `timings.queue_ms + timings.prompt_ms` (enqueued to the first
//! sampled token); wall is the client's whole request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use serde_json::{json, Value};

#[derive(Parser)]
struct Args {
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Decoding threads of the worker.
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// The worker's host memory for saved prefixes, MiB (0: none).
    #[arg(long, default_value_t = 1024)]
    prompt_cache_mib: usize,
    /// Sequences of the worker; as many other prompts pass before the third request.
    #[arg(long, default_value_t = 8)]
    slots: usize,
    /// The worker binary; by default the one built beside this example.
    #[arg(long)]
    worker: Option<PathBuf>,
}

/// A system prompt of ~1,300 tokens, made unique per round so the first request of a round finds nothing
/// cached.
fn system_prompt(round: usize) -> String {
    let mut text = format!("Session {round}-{}. You extract invoice fields for the accounts team.\n", std::process::id());
    for rule in 1..=60 {
        text.push_str(&format!(
            "Rule {rule}: when an invoice mentions item group {rule}, copy its amount exactly as written, keep the currency, and never round.\n"
        ));
    }
    text
}

fn request(round: usize, question: &str) -> Value {
    json!({
        "model": runaii_testkit::MODEL,
        "messages": [{"role": "system", "content": system_prompt(round)}, {"role": "user", "content": question}],
        "max_tokens": 8,
        "temperature": 0,
    })
}

struct Measured {
    prompt_tokens: u64,
    cached_tokens: u64,
    ttft_ms: f64,
    wall_ms: f64,
}

async fn measure(client: &reqwest::Client, url: &str, body: &Value) -> Measured {
    let started = Instant::now();
    let answer: Value = client.post(format!("{url}/v1/chat/completions")).json(body).send().await.unwrap().json().await.unwrap();
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let timings = &answer["timings"];
    Measured {
        prompt_tokens: answer["usage"]["prompt_tokens"].as_u64().unwrap_or_else(|| panic!("no usage: {answer}")),
        cached_tokens: answer["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0),
        ttft_ms: timings["queue_ms"].as_f64().unwrap_or(0.0) + timings["prompt_ms"].as_f64().unwrap_or(0.0),
        wall_ms,
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let binary = args.worker.clone().unwrap_or_else(|| {
        let exe = std::env::current_exe().unwrap();
        exe.parent().and_then(|examples| examples.parent()).unwrap().join("runaii-worker")
    });
    let threads = args.threads.to_string();
    let (mib, slots) = (args.prompt_cache_mib.to_string(), args.slots.to_string());
    let worker =
        runaii_testkit::start_worker(&binary, &["--threads", &threads, "--accept-bearer", "--prompt-cache-mib", &mib, "--slots", &slots]);
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, runaii_testkit::worker_bearer().parse().unwrap());
    let client = reqwest::Client::builder().default_headers(headers).build().unwrap();

    println!("| round | prompt tokens | cached (2nd) | TTFT 1st ms | TTFT 2nd ms | speed-up | wall 1st ms | wall 2nd ms | cached (evicted) | TTFT evicted ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for round in 0..args.rounds {
        let cold = measure(&client, &worker.url, &request(round, "Invoice 1: item group 7, 120.50 EUR. What is the amount?")).await;
        let warm = measure(&client, &worker.url, &request(round, "Invoice 2: item group 9, 88.10 EUR. What is the amount?")).await;
        // Other short prompts take every sequence in turn: the round's prefix leaves them.
        for other in 0..args.slots {
            let passing = json!({
                "model": runaii_testkit::MODEL,
                "messages": [
                    {"role": "system", "content": format!("Passing prompt {round}-{other}.")},
                    {"role": "user", "content": "Name a colour."}
                ],
                "max_tokens": 4,
                "temperature": 0,
            });
            measure(&client, &worker.url, &passing).await;
        }
        let evicted = measure(&client, &worker.url, &request(round, "Invoice 3: item group 4, 19.90 EUR. What is the amount?")).await;
        let ratio = cold.ttft_ms / warm.ttft_ms.max(0.001);
        ratios.push(ratio);
        println!(
            "| {round} | {} | {} | {:.1} | {:.1} | {ratio:.1}× | {:.1} | {:.1} | {} | {:.1} |",
            cold.prompt_tokens,
            warm.cached_tokens,
            cold.ttft_ms,
            warm.ttft_ms,
            cold.wall_ms,
            warm.wall_ms,
            evicted.cached_tokens,
            evicted.ttft_ms
        );
        assert_eq!(cold.cached_tokens, 0, "the first request of a round finds nothing cached");
    }
    ratios.sort_by(f64::total_cmp);
    println!("\nmedian TTFT speed-up: {:.1}×", ratios[ratios.len() / 2]);
}
