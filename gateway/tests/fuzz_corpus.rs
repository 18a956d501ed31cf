//! Replays every committed input under `fuzz/corpus/<target>/` (seeds and the regressions fuzzing
//! found) through the fuzz targets' own checks (`fuzz/harness/`, compiled in here), so `cargo test`
//! keeps the harness compiling and the corpus passing without the instrumented nightly build
//! `scripts/fuzz.sh` needs.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

#[path = "../../fuzz/harness/mod.rs"]
mod fuzzing;

/// A target's check of one input: it panics when an invariant breaks.
type Check = fn(&[u8]);

/// Each target's corpus directory and its check, as `fuzz/fuzz_targets/<target>.rs` wires them.
const TARGETS: [(&str, Check); 4] =
    [("schema", fuzzing::schema), ("messages", fuzzing::messages), ("responses", fuzzing::responses), ("chat", fuzzing::chat)];

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = entries.map(|e| e.expect("a corpus entry").path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

#[test]
fn every_corpus_input_passes_its_target() {
    for (target, check) in TARGETS {
        let files = corpus(target);
        assert!(!files.is_empty(), "fuzz/corpus/{target} is empty");
        for file in files {
            let data = std::fs::read(&file).expect("a readable corpus file");
            // A panic names the target's invariant; this names the input.
            eprintln!("{target}: {}", file.display());
            check(&data);
        }
    }
}

/// The seeds are meant to get the fuzzer past JSON parsing and into the checks: each must be JSON.
/// Regressions (`regress-*`) are kept byte for byte as the fuzzer found them, JSON or not.
#[test]
fn every_seed_is_json() {
    let is_seed = |f: &PathBuf| f.file_name().is_some_and(|n| !n.to_string_lossy().starts_with("regress-"));
    for (target, _) in TARGETS {
        for file in corpus(target).into_iter().filter(is_seed) {
            let data = std::fs::read(&file).expect("a readable corpus file");
            assert!(serde_json::from_slice::<serde_json::Value>(&data).is_ok(), "{} is not JSON", file.display());
        }
    }
}
