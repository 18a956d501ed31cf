//! Decoding threads on a shared node. llama.cpp's threads spin at every barrier of a decode step; when
//! another process takes one of their cores, each step waits for a thread the kernel has descheduled,
//! and speed collapses (here: one busy loop beside a 2-thread worker cost 70–75% of tokens/s, while one
//! thread kept 2.7× the speed of two: docs/benchmarks.md). So a watcher samples what other processes
//! use (`neighbours.rs`) and, while they take a share of the cores our threads need, the engine decodes
//! on one thread; when they leave, on all of them again.
//!
//! The lever is OpenMP's: llama-cpp-2 does not expose `llama_set_n_threads` (its context pointer is
//! private), but ggml runs each graph in `#pragma omp parallel num_threads(n)` and then works with the
//! team OpenMP actually gave it. With max-active-levels 0 every parallel region gets a team of one, so
//! the same context decodes on one thread; restoring the level restores the configured threads. That is
//! why the choice is all threads or one: OpenMP has no per-region cap below the `num_threads` clause.
//! The level is set on the engine thread, the one that calls `llama_decode`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::neighbours::Neighbours;
use super::EngineStats;

/// How often the watcher samples `/proc`.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// Weight of the newest sample in the smoothed figure: about a second of memory at 250 ms.
const SMOOTHING: f64 = 0.4;
/// Others' CPU, beyond the cores our threads leave free, at which we drop to one thread (half a core:
/// one of our spinning threads then waits on the kernel most steps) and below which we go back.
const ENTER_ABOVE: f64 = 0.5;
const LEAVE_BELOW: f64 = 0.25;

/// Whether the node is contended, with hysteresis so a neighbour near the line does not flip it each
/// sample.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Cores our threads leave to others before they compete with us.
    spare: f64,
    threads: u32,
    contended: bool,
}

impl Policy {
    #[must_use]
    pub fn new(cpus: usize, threads: u32) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let spare = (cpus as f64 - f64::from(threads)).max(0.0);
        Self { spare, threads, contended: false }
    }

    /// The threads to decode with, given others' smoothed CPU in cores.
    pub fn threads_for(&mut self, others: f64) -> u32 {
        if self.contended {
            self.contended = others >= self.spare + LEAVE_BELOW;
        } else {
            self.contended = others > self.spare + ENTER_ABOVE;
        }
        if self.contended {
            1
        } else {
            self.threads
        }
    }
}

/// The engine's side: applies the watcher's choice before each decode, on the engine thread.
#[derive(Debug)]
pub struct Governor {
    wanted: Arc<AtomicU32>,
    applied: u32,
    /// OpenMP's max-active-levels as it was at start: what the configured threads run with.
    levels: i32,
}

impl Governor {
    /// Starts the watcher when adapting is on and can help (more than one thread, an OpenMP build);
    /// otherwise the engine keeps its configured threads. Call on the engine thread.
    #[must_use]
    pub fn start(threads: u32, adapt: bool, stats: &Arc<EngineStats>) -> Self {
        stats.decode_threads.store(u64::from(threads), Ordering::Relaxed);
        let wanted = Arc::new(AtomicU32::new(threads));
        let governor = Self { wanted: Arc::clone(&wanted), applied: threads, levels: openmp::max_active_levels() };
        if !adapt || threads <= 1 {
            return governor;
        }
        if !openmp::AVAILABLE {
            tracing::warn!("llama.cpp was built without OpenMP: decoding threads stay at {threads} under contention");
            return governor;
        }
        let others = Arc::clone(stats);
        let spawned =
            std::thread::Builder::new().name("threads-watch".into()).spawn(move || watch(threads, &wanted, &others.others_millicores));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "could not start the contention watcher; decoding threads stay fixed");
        }
        governor
    }

    /// Before each decode: switches the thread count if the watcher asks for another.
    pub fn apply(&mut self, stats: &EngineStats) {
        let wanted = self.wanted.load(Ordering::Relaxed);
        if wanted == self.applied {
            return;
        }
        openmp::set_max_active_levels(if wanted == 1 { 0 } else { self.levels });
        tracing::info!(
            from = self.applied,
            to = wanted,
            others_cores = EngineStats::get(&stats.others_millicores) as f64 / 1000.0,
            "decoding threads changed: other processes {} the cores",
            if wanted == 1 { "are busy on" } else { "have left" }
        );
        self.applied = wanted;
        stats.decode_threads.store(u64::from(wanted), Ordering::Relaxed);
        EngineStats::add(&stats.thread_switches, 1);
    }
}

/// The watcher: samples others' CPU, smooths it, and publishes the threads the policy wants. Runs for
/// the life of the process.
fn watch(threads: u32, wanted: &AtomicU32, others_millicores: &AtomicU64) {
    let mut neighbours = Neighbours::new();
    let mut policy = Policy::new(neighbours.cpus(), threads);
    let mut smoothed = 0.0;
    loop {
        std::thread::sleep(SAMPLE_EVERY);
        let Some(others) = neighbours.sample() else { continue };
        smoothed = SMOOTHING * others + (1.0 - SMOOTHING) * smoothed;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        others_millicores.store((smoothed * 1000.0).round() as u64, Ordering::Relaxed);
        wanted.store(policy.threads_for(smoothed), Ordering::Relaxed);
    }
}

/// OpenMP's runtime (libgomp), linked with llama.cpp when it was built with it (`build.rs` sets
/// `ggml_openmp` from llama.cpp's CMake cache). The worker's only unsafe code outside examples: two calls
/// into the C runtime llama.cpp already uses, with plain integers.
#[cfg(ggml_openmp)]
#[allow(unsafe_code)]
mod openmp {
    use std::ffi::c_int;

    pub const AVAILABLE: bool = true;

    extern "C" {
        fn omp_get_max_active_levels() -> c_int;
        fn omp_set_max_active_levels(levels: c_int);
    }

    pub fn max_active_levels() -> i32 {
        // SAFETY: a query of the calling thread's OpenMP settings, with no arguments.
        unsafe { omp_get_max_active_levels() }
    }

    pub fn set_max_active_levels(levels: i32) {
        // SAFETY: sets the calling thread's OpenMP setting; any non-negative level is valid.
        unsafe { omp_set_max_active_levels(levels.max(0)) }
    }
}

#[cfg(not(ggml_openmp))]
mod openmp {
    pub const AVAILABLE: bool = false;

    pub fn max_active_levels() -> i32 {
        1
    }

    pub fn set_max_active_levels(_levels: i32) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_neighbour_takes_us_to_one_thread_and_its_leaving_brings_them_back() {
        // Two cores, two threads: nothing is spare.
        let mut policy = Policy::new(2, 2);
        assert_eq!(policy.threads_for(0.1), 2);
        assert_eq!(policy.threads_for(0.5), 2, "half a core is not yet contention");
        assert_eq!(policy.threads_for(0.8), 1);
        // Between the two lines the choice holds either way.
        assert_eq!(policy.threads_for(0.4), 1);
        assert_eq!(policy.threads_for(0.2), 2);
        assert_eq!(policy.threads_for(0.4), 2);
    }

    #[test]
    fn cores_our_threads_leave_free_are_others_to_use() {
        // Eight cores, four threads: four cores of neighbours cost us nothing.
        let mut policy = Policy::new(8, 4);
        assert_eq!(policy.threads_for(4.0), 4);
        assert_eq!(policy.threads_for(4.6), 1);
        assert_eq!(policy.threads_for(4.1), 4, "back below the line");
    }

    #[test]
    fn one_thread_has_nothing_to_drop() {
        let mut policy = Policy::new(2, 1);
        assert_eq!(policy.threads_for(2.0), 1);
    }

    #[cfg(ggml_openmp)]
    #[test]
    fn the_openmp_lever_is_this_threads_setting_and_restores() {
        let levels = openmp::max_active_levels();
        openmp::set_max_active_levels(0);
        assert_eq!(openmp::max_active_levels(), 0);
        openmp::set_max_active_levels(levels);
        assert_eq!(openmp::max_active_levels(), levels);
    }
}
