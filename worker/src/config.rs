//! Worker settings, from flags or `RUNAII_*` environment variables.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use runaii_wire::worker_auth::{SecretError, SecretText, WorkerSecrets};

use crate::engine::LoadSettings;

#[derive(Debug, Clone, Parser)]
#[command(name = "runaii-worker", about = "One model replica: llama.cpp with continuous batching and constrained decoding")]
pub struct Settings {
    /// GGUF file to serve. `scripts/fetch-model.sh` puts the embedded default model here.
    #[arg(long, env = "RUNAII_MODEL_PATH", default_value = "models/SmolLM2-135M-Instruct.Q4_1.gguf")]
    pub model_path: PathBuf,
    /// The model id clients send in `model`.
    #[arg(long, env = "RUNAII_MODEL_ID", default_value = "smollm2-135m-instruct")]
    pub model_id: String,
    #[arg(long, env = "RUNAII_WORKER_ADDR", default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// A Jinja chat template to use instead of the model's own (as llama-server's `--chat-template-file`):
    /// for models whose GGUF template is missing or wrong. Its text decides the tool-call format.
    #[arg(long, env = "RUNAII_CHAT_TEMPLATE_FILE")]
    pub chat_template_file: Option<PathBuf>,
    /// Sequences decoded together in one batch.
    #[arg(long, env = "RUNAII_SLOTS", default_value_t = 8)]
    pub slots: u32,
    /// Context window of each sequence, in tokens (prompt + answer).
    #[arg(long, env = "RUNAII_CTX_PER_SLOT", default_value_t = 4096)]
    pub ctx_per_slot: u32,
    /// Most tokens fed to llama.cpp in one decode call.
    #[arg(long, env = "RUNAII_BATCH_SIZE", default_value_t = 512)]
    pub batch_size: u32,
    /// Keep each finished request's KV cache and give the next prompt that shares its prefix that sequence,
    /// so the shared part is not decoded again (`usage.prompt_tokens_details.cached_tokens`).
    #[arg(long, env = "RUNAII_PREFIX_CACHE", default_value_t = true, action = clap::ArgAction::Set)]
    pub prefix_cache: bool,
    /// Host memory, in MiB, for sequences' KV caches saved when their sequence is reused and restored
    /// for a later prompt of the same tenant that shares their prefix; 0 turns it off.
    #[arg(long, env = "RUNAII_PROMPT_CACHE_MIB", default_value_t = 1024)]
    pub prompt_cache_mib: usize,
    /// The most tokens a sequence guesses ahead per decode, from what followed its last tokens earlier in
    /// the prompt or the answer, decoded beside its sampled token and kept only where sampling chooses
    /// them anyway: an answer that copies from its prompt takes fewer decode steps. 0 (the default) turns
    /// drafts off: on a CPU a decode's time grows with its tokens, and the guesses cost about what they
    /// save (docs/benchmarks.md, "Prompt-lookup drafts"); they pay where a batch's extra rows are nearly
    /// free, as on a GPU.
    #[arg(long, env = "RUNAII_DRAFT_MAX", default_value_t = 0)]
    pub draft_max: usize,
    /// Requests that may wait for a free slot; past this the worker answers 503.
    #[arg(long, env = "RUNAII_QUEUE_DEPTH", default_value_t = 64)]
    pub queue_depth: usize,
    /// Decoding threads; defaults to the number of physical cores.
    #[arg(long, env = "RUNAII_THREADS")]
    pub threads: Option<u32>,
    /// While other processes are busy on the cores the decoding threads need, decode on one thread (their
    /// spinning barriers collapse otherwise); all of them again when the cores are free.
    #[arg(long, env = "RUNAII_ADAPT_THREADS", default_value_t = true, action = clap::ArgAction::Set)]
    pub adapt_threads: bool,
    /// Layers offloaded to the GPU (a `cuda` build only).
    #[arg(long, env = "RUNAII_GPU_LAYERS", default_value_t = 0)]
    pub gpu_layers: u32,
    /// Output limit when a request sets none.
    #[arg(long, env = "RUNAII_DEFAULT_MAX_TOKENS", default_value_t = 1024)]
    pub default_max_tokens: u32,
    /// Largest request body accepted, in bytes.
    #[arg(long, env = "RUNAII_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Redis of the gateways' worker registry; when set, the worker announces itself there. Several
    /// comma-separated node URLs mean a Redis Cluster.
    #[arg(long, env = "RUNAII_ANNOUNCE_REDIS_URL", hide_env_values = true)]
    pub announce_redis_url: Option<SecretText>,
    /// The URL gateways reach this worker at (default: the --listen address, over http).
    #[arg(long, env = "RUNAII_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// The fleet's shared worker secret, one per line (the first signs; every line is accepted, for
    /// rotation). Inference needs a gateway's signature under it; announcements are signed with it.
    /// Re-read while running. `scripts/run.sh` writes `.data/worker-secret`.
    #[arg(long, env = "RUNAII_WORKER_SECRET_FILE")]
    pub worker_secret_file: Option<PathBuf>,
    /// The secret itself, for development and tests; the file is preferred (it can be rotated).
    #[arg(long, env = "RUNAII_WORKER_SECRET", hide_env_values = true)]
    pub worker_secret: Option<SecretText>,
    /// Also serve requests that carry the static bearer token (`runaii-gateway worker-token`) instead of
    /// a gateway's signature: for benchmark tools that call a worker directly. Weaker: whoever sees the
    /// token on the network can use it until the secret rotates.
    #[arg(long, env = "RUNAII_ACCEPT_BEARER")]
    pub accept_bearer: bool,
    /// Exit when standard input closes: lets a parent process (tests, supervisors) tie our life to its own.
    #[arg(long, hide = true)]
    pub exit_on_stdin_eof: bool,
}

impl Settings {
    /// # Errors
    /// No secret configured, or an unusable one: a worker never serves without one.
    pub fn worker_secrets(&self) -> Result<WorkerSecrets, SecretError> {
        WorkerSecrets::load(self.worker_secret_file.as_ref(), self.worker_secret.as_ref())
    }

    #[must_use]
    pub fn load_settings(&self) -> LoadSettings {
        LoadSettings {
            model_path: self.model_path.clone(),
            slots: self.slots.max(1),
            ctx_per_slot: self.ctx_per_slot.max(64),
            batch_size: self.batch_size.max(32),
            threads: self.threads.unwrap_or_else(physical_cores),
            queue_depth: self.queue_depth,
            gpu_layers: self.gpu_layers,
            prefix_cache: self.prefix_cache,
            prompt_cache_bytes: if self.prefix_cache { self.prompt_cache_mib.saturating_mul(1 << 20) } else { 0 },
            adapt_threads: self.adapt_threads,
            draft_max: self.draft_max,
        }
    }
}

/// Physical cores (not hyper-threads): decoding with one thread per logical CPU is slower on SMT
/// machines, and llama.cpp's own default measured 40 tok/s against 75 here.
#[must_use]
pub fn physical_cores() -> u32 {
    let logical = std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1));
    let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else { return logical };
    let mut cores = std::collections::HashSet::new();
    let mut physical = "";
    for line in cpuinfo.lines() {
        let (key, value) = line.split_once(':').map_or(("", ""), |(k, v)| (k.trim(), v.trim()));
        match key {
            "physical id" => physical = value,
            "core id" => {
                cores.insert((physical.to_owned(), value.to_owned()));
            }
            _ => {}
        }
    }
    let found = u32::try_from(cores.len()).unwrap_or(0);
    // In a container limited to fewer CPUs than the host has cores, the limit wins.
    if found == 0 {
        logical
    } else {
        found.min(logical)
    }
}
