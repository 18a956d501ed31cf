//! A spinner on stderr while nothing has arrived yet — only when stderr is a terminal, so scripts and logs
//! never see it.

use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Spins until [`stop`](Self::stop) or drop, then clears its line.
#[derive(Debug)]
pub struct Spinner {
    running: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Spinner {
    #[must_use]
    pub fn start(label: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self { running: None };
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let label = label.to_owned();
        let thread = std::thread::spawn(move || {
            let mut frame = 0;
            while !flag.load(Ordering::Relaxed) {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r{} {label}", FRAMES[frame % FRAMES.len()]);
                let _ = err.flush();
                drop(err);
                frame += 1;
                std::thread::sleep(Duration::from_millis(80));
            }
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        });
        Self { running: Some((stop, thread)) }
    }

    /// Stops and clears the line (before the first token is printed). Idempotent.
    pub fn stop(&mut self) {
        if let Some((stop, thread)) = self.running.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop();
    }
}
