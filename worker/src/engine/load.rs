//! Loading a model and starting the engine thread that owns its context.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use tokio::sync::oneshot;

use super::closing::JsonTokens;
use super::prefix::CachedPrefix;
use super::queue::JobQueue;
use super::saved::SavedPrefixes;
use super::scheduler::Scheduler;
use super::threads::Governor;
use super::{EngineStats, Job};
use crate::constraint::ConstraintCompiler;

#[derive(Debug, Clone)]
pub struct LoadSettings {
    pub model_path: PathBuf,
    pub slots: u32,
    pub ctx_per_slot: u32,
    pub batch_size: u32,
    pub threads: u32,
    pub queue_depth: usize,
    pub gpu_layers: u32,
    /// Keep finished requests' KV caches for prompts that share their prefix.
    pub prefix_cache: bool,
    /// Host memory for sequences' KV caches saved beyond the sequences (`saved.rs`); 0: none.
    pub prompt_cache_bytes: usize,
    /// Decode on one thread while other processes are busy on our cores (`threads.rs`).
    pub adapt_threads: bool,
    /// The most guessed tokens a sequence decodes beside its sampled one (`drafts.rs`); 0: none.
    pub draft_max: usize,
}

/// The engine once the model is up: the model, its constraint compiler, the queue jobs go to.
#[derive(Debug)]
pub struct Loaded {
    pub model: Arc<LlamaModel>,
    pub compiler: Arc<ConstraintCompiler>,
    pub jobs: Arc<JobQueue<Job>>,
    pub stats: Arc<EngineStats>,
    pub settings: LoadSettings,
}

impl Loaded {
    /// Requests waiting for a slot.
    #[must_use]
    pub fn queue_depth(&self) -> usize {
        self.jobs.len()
    }
}

impl Drop for Loaded {
    /// No more jobs can come: the engine thread ends once the queued ones are done.
    fn drop(&mut self) {
        self.jobs.close();
    }
}

/// llama.cpp's backend may be initialised once per process.
fn backend() -> anyhow::Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<LlamaBackend> = OnceLock::new();
    if let Some(b) = BACKEND.get() {
        return Ok(b);
    }
    let b = LlamaBackend::init()?;
    Ok(BACKEND.get_or_init(|| b))
}

/// Loads the model on a dedicated thread, which then runs the decode loop for the life of the process.
/// Resolves once the model is ready, or with the reason it could not load.
pub fn load(settings: LoadSettings) -> oneshot::Receiver<anyhow::Result<Arc<Loaded>>> {
    let (ready_tx, ready_rx) = oneshot::channel();
    let spawned = std::thread::Builder::new().name("engine".into()).spawn(move || {
        let model = match load_model(&settings) {
            Ok(model) => model,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        let started = start(&model, &settings);
        let (ctx, loaded, jobs_rx) = match started {
            Ok(parts) => parts,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        let stats = Arc::clone(&loaded.stats);
        if ready_tx.send(Ok(loaded)).is_err() {
            return;
        }
        let batch_size = settings.batch_size as usize;
        let threads = Governor::start(settings.threads, settings.adapt_threads, &stats);
        Scheduler {
            model: &model,
            ctx,
            jobs: jobs_rx,
            stats,
            slots: (0..settings.slots).map(|_| None).collect(),
            caches: (0..settings.slots).map(|_| CachedPrefix::default()).collect(),
            clock: 0,
            prefix_cache: settings.prefix_cache,
            draft_max: settings.draft_max,
            saved: SavedPrefixes::new(settings.prompt_cache_bytes),
            batch: LlamaBatch::new(batch_size, i32::try_from(settings.slots).unwrap_or(1)),
            batch_size,
            json_tokens: json_tokens(&model),
            threads,
            stashed: None,
        }
        .run();
    });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not spawn the engine thread");
    }
    ready_rx
}

/// Which tokens close JSON values, from every token's text, once per model.
fn json_tokens(model: &LlamaModel) -> Arc<JsonTokens> {
    use llama_cpp_2::token::LlamaToken;
    let vocab = model.vocab();
    let n = u32::try_from(vocab.n_tokens()).unwrap_or(0);
    Arc::new(JsonTokens::new((0..n).map(|id| vocab.token_to_piece(LlamaToken(i32::try_from(id).unwrap_or(0)), false, None))))
}

fn load_model(settings: &LoadSettings) -> anyhow::Result<Arc<LlamaModel>> {
    let params = LlamaModelParams::default().with_n_gpu_layers(settings.gpu_layers);
    let model = LlamaModel::load_from_file(backend()?, &settings.model_path, &params)
        .map_err(|e| anyhow::anyhow!("llama.cpp could not load {}: {e}", settings.model_path.display()))?;
    Ok(Arc::new(model))
}

type Started<'m> = (llama_cpp_2::context::LlamaContext<'m>, Arc<Loaded>, Arc<JobQueue<Job>>);

fn start<'m>(model: &'m Arc<LlamaModel>, settings: &LoadSettings) -> anyhow::Result<Started<'m>> {
    let compiler = ConstraintCompiler::new(Arc::clone(model), settings.ctx_per_slot)?;
    let threads = i32::try_from(settings.threads).unwrap_or(1);
    // Each sequence gets its own `ctx_per_slot` cells: llama.cpp splits n_ctx evenly across n_seq_max
    // when the KV cache is not unified.
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(settings.ctx_per_slot * settings.slots))
        .with_n_batch(settings.batch_size)
        .with_n_ubatch(settings.batch_size)
        .with_n_seq_max(settings.slots)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let ctx = model.new_context(backend()?, params)?;
    let jobs = Arc::new(JobQueue::new(settings.queue_depth));
    let loaded = Arc::new(Loaded {
        model: Arc::clone(model),
        compiler: Arc::new(compiler),
        jobs: Arc::clone(&jobs),
        stats: Arc::new(EngineStats::default()),
        settings: settings.clone(),
    });
    Ok((ctx, loaded, jobs))
}
