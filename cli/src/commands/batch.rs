//! `runaii batch FILE`: uploads a batch input, creates the batch, follows it (a progress bar on a
//! terminal, one line per change of status otherwise) and writes its output and error files next to the
//! input. The exit status is 0 only when the batch completed with every line answered 2xx.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rust_decimal::Decimal;
use serde::Deserialize;
use serde_json::json;

use super::Context;
use crate::args::BatchArgs;
use crate::error::CliError;
use crate::http::Auth;

#[derive(Debug, Deserialize)]
struct Batch {
    id: String,
    status: String,
    output_file_id: Option<String>,
    error_file_id: Option<String>,
    request_counts: Counts,
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Counts {
    total: i64,
    completed: i64,
    failed: i64,
}

#[derive(Debug, Deserialize)]
struct Usage {
    cost: Option<String>,
}

#[derive(Debug, Deserialize)]
struct FileObject {
    id: String,
}

const ENDED: [&str; 4] = ["completed", "failed", "expired", "cancelled"];

/// # Errors
/// An unreadable input, the gateway's refusal, or a batch that did not complete cleanly.
pub async fn run(context: &Context, args: &BatchArgs) -> Result<(), CliError> {
    let bytes = std::fs::read(&args.file).map_err(CliError::io(format!("reading {}", args.file.display())))?;
    let name = args.file.file_name().map_or_else(|| "batch.jsonl".to_owned(), |n| n.to_string_lossy().into_owned());
    let gateway = &context.gateway;
    let file: FileObject = gateway.upload(&name, bytes, "batch").await?;
    let create = json!({"input_file_id": file.id, "endpoint": args.endpoint, "completion_window": "24h"});
    let mut batch: Batch = gateway.post("/v1/batches", &create, Auth::Key).await?;
    if args.no_wait {
        println!("{}", batch.id);
        return Ok(());
    }
    eprintln!("batch {} submitted ({}, file {})", batch.id, args.endpoint, file.id);
    let mut progress = Progress::new(std::io::stderr().is_terminal());
    let every = Duration::from_secs_f64(args.poll_seconds.clamp(0.05, 3600.0));
    while !ENDED.contains(&batch.status.as_str()) {
        progress.show(&batch);
        tokio::time::sleep(every).await;
        batch = gateway.get(&format!("/v1/batches/{}", batch.id), Auth::Key).await?;
    }
    progress.show(&batch);
    progress.finish();
    let output =
        write(context, batch.output_file_id.as_deref(), args.output.clone().unwrap_or_else(|| beside(&args.file, "output"))).await?;
    let errors =
        write(context, batch.error_file_id.as_deref(), args.errors.clone().unwrap_or_else(|| beside(&args.file, "errors"))).await?;
    let counts = &batch.request_counts;
    let cost = batch.usage.as_ref().and_then(|u| u.cost.as_deref()).and_then(|c| c.parse::<Decimal>().ok()).unwrap_or_default();
    eprintln!(
        "batch {} {}: {} of {} lines answered, {} failed, {cost} USD",
        batch.id, batch.status, counts.completed, counts.total, counts.failed
    );
    for (what, path) in [("answers", output), ("errors", errors)] {
        if let Some(path) = path {
            eprintln!("{what}: {}", path.display());
        }
    }
    let unanswered = counts.total - counts.completed;
    if batch.status != "completed" || unanswered > 0 {
        return Err(CliError::Batch { id: batch.id, status: batch.status, failed: unanswered, total: counts.total });
    }
    Ok(())
}

/// `invoices.jsonl` → `invoices.output.jsonl`.
fn beside(input: &Path, what: &str) -> PathBuf {
    let stem = input.file_stem().map_or_else(|| "batch".into(), |s| s.to_string_lossy().into_owned());
    input.with_file_name(format!("{stem}.{what}.jsonl"))
}

async fn write(context: &Context, file: Option<&str>, path: PathBuf) -> Result<Option<PathBuf>, CliError> {
    let Some(id) = file else { return Ok(None) };
    let bytes = context.gateway.file_content(id).await?;
    std::fs::write(&path, bytes).map_err(CliError::io(format!("writing {}", path.display())))?;
    Ok(Some(path))
}

/// How a batch is doing, on stderr: a bar redrawn in place on a terminal; otherwise a line each time the
/// status or the counts change.
struct Progress {
    terminal: bool,
    last: String,
}

impl Progress {
    fn new(terminal: bool) -> Self {
        Self { terminal, last: String::new() }
    }

    fn show(&mut self, batch: &Batch) {
        const WIDTH: i64 = 30;
        let c = &batch.request_counts;
        let done = c.completed + c.failed;
        let filled = if c.total > 0 { (done * WIDTH / c.total).clamp(0, WIDTH) } else { 0 };
        let bar =
            format!("{}{}", "#".repeat(usize::try_from(filled).unwrap_or(0)), "-".repeat(usize::try_from(WIDTH - filled).unwrap_or(0)));
        let cost = batch.usage.as_ref().and_then(|u| u.cost.as_deref()).unwrap_or("0");
        let line = format!("[{bar}] {done}/{} lines, {} failed, {cost} USD, {}", c.total, c.failed, batch.status);
        if line == self.last {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.last = line;
    }

    fn finish(&self) {
        if self.terminal && !self.last.is_empty() {
            eprintln!();
        }
    }
}
