//! Arbitrary bytes as a `POST /v1/chat/completions` body; the invariants are in `harness::chat` (`fuzz/harness/`).
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::chat(data));
