//! Worker benchmark: tokens/s unconstrained vs json_schema-constrained at 1, 4 and 8 concurrent
//! streams against a running worker, and constraint compile time over the 200 JSONSchemaBench schemas
//! (in-process, each schema compiled once, refusals included).
//!
//! ```text
//! RUNAII_WORKER_TOKEN=$(runaii-gateway worker-token) cargo run --example bench -p runaii-worker -- --url http://127.0.0.1:8081 --rounds 3
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use runaii_wire::cache_scope::CacheScope;
use serde_json::{json, Value};

#[derive(Parser)]
struct Args {
    /// A running worker.
    #[arg(long, default_value = "http://127.0.0.1:8081")]
    url: String,
    /// Rounds of `concurrency` parallel requests per cell.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value_t = 128)]
    max_tokens: u32,
    /// The model, for the in-process compile-time measurement.
    #[arg(long, default_value = "models/SmolLM2-135M-Instruct.Q4_1.gguf")]
    model_path: PathBuf,
    /// The raw JSONSchemaBench schemas, byte for byte (the repository's sample, run from its root).
    #[arg(long, default_value = "data/jsonschemabench/raw")]
    bench_dir: PathBuf,
    #[arg(long)]
    skip_compile: bool,
}

fn request(constrained: bool, max_tokens: u32, i: usize) -> Value {
    let mut req = json!({
        "model": "smollm2-135m-instruct",
        "messages": [{"role": "user", "content": format!("Write a long story about dragon number {i}, with a title.")}],
        "max_tokens": max_tokens,
        "temperature": 0.7,
        "seed": i,
    });
    if constrained {
        req["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "story", "schema": {
            "type": "object",
            // minLength keeps the model writing prose inside the string until max_tokens, as the
            // unconstrained request does, so both sides generate the same number of tokens.
            "properties": {"title": {"type": "string"}, "story": {"type": "string", "minLength": 4000}},
            "required": ["title", "story"]
        }}});
    }
    req
}

struct Cell {
    tokens: u64,
    wall: Duration,
    per_stream: Vec<f64>,
}

async fn run_cell(client: &reqwest::Client, args: &Args, constrained: bool, concurrency: usize) -> Cell {
    let mut tokens = 0;
    let mut per_stream = Vec::new();
    let started = Instant::now();
    for round in 0..args.rounds {
        let calls = (0..concurrency).map(|i| {
            let body = request(constrained, args.max_tokens, round * 100 + i);
            let url = format!("{}/v1/chat/completions", args.url);
            async move { client.post(url).json(&body).send().await.unwrap().json::<Value>().await.unwrap() }
        });
        for answer in futures::future::join_all(calls).await {
            let n = answer["usage"]["completion_tokens"].as_u64().unwrap_or_else(|| panic!("no usage: {answer}"));
            tokens += n;
            per_stream.push(answer["timings"]["predicted_per_second"].as_f64().unwrap_or(0.0));
        }
    }
    Cell { tokens, wall: started.elapsed(), per_stream }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    // Workers serve only gateways: the bearer token of the fleet's secret (`runaii-gateway worker-token`),
    // from RUNAII_WORKER_TOKEN, as scripts/bench_peers.py sends it, to a worker started with
    // `--accept-bearer`.
    let mut headers = reqwest::header::HeaderMap::new();
    if let Ok(token) = std::env::var("RUNAII_WORKER_TOKEN") {
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    }
    let client = reqwest::Client::builder().timeout(Duration::from_secs(600)).default_headers(headers).build().unwrap();
    // Warm up (first request pays page faults and allocator growth).
    run_cell(&client, &Args { rounds: 1, ..Args::parse() }, true, 1).await;

    println!("| mode | concurrency | completion tokens | wall s | aggregate tok/s | mean per-stream decode tok/s |");
    println!("|---|---|---|---|---|---|");
    let mut aggregate = std::collections::HashMap::new();
    for concurrency in [1, 4, 8] {
        for constrained in [false, true] {
            let cell = run_cell(&client, &args, constrained, concurrency).await;
            let agg = cell.tokens as f64 / cell.wall.as_secs_f64();
            let mean = cell.per_stream.iter().sum::<f64>() / cell.per_stream.len() as f64;
            let mode = if constrained { "json_schema" } else { "unconstrained" };
            aggregate.insert((constrained, concurrency), agg);
            println!("| {mode} | {concurrency} | {} | {:.2} | {agg:.1} | {mean:.1} |", cell.tokens, cell.wall.as_secs_f64());
        }
    }
    for concurrency in [1, 4, 8] {
        println!(
            "constrained / unconstrained at {concurrency}: {:.2}x",
            aggregate[&(true, concurrency)] / aggregate[&(false, concurrency)]
        );
    }
    for constrained in [false, true] {
        println!(
            "{} aggregate at 8 / single stream: {:.2}x",
            if constrained { "json_schema" } else { "unconstrained" },
            aggregate[&(constrained, 8)] / aggregate[&(constrained, 1)]
        );
    }
    if !args.skip_compile {
        compile_times(&args);
    }
}

/// Compile time of each raw bench schema with a fresh compiler (no cache hits), refusals included.
fn compile_times(args: &Args) {
    use llama_cpp_2::llama_backend::LlamaBackend;
    use llama_cpp_2::model::params::LlamaModelParams;
    use llama_cpp_2::model::LlamaModel;
    use runaii_worker::constraint::{ConstraintCompiler, ConstraintSpec};

    let backend = LlamaBackend::init().unwrap();
    let model = Arc::new(LlamaModel::load_from_file(&backend, &args.model_path, &LlamaModelParams::default()).unwrap());
    let compiler = ConstraintCompiler::new(model, 4096).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&args.bench_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut times = Vec::new();
    let mut refused = 0;
    for file in &files {
        let schema: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        let started = Instant::now();
        if compiler.compile(&ConstraintSpec::JsonSchema(schema), &CacheScope::default()).is_err() {
            refused += 1;
        }
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "constraint compile over {} schemas ({refused} refused): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        times.last().copied().unwrap_or(0.0)
    );
}
