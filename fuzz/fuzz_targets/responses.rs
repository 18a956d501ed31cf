//! Arbitrary bytes as a `POST /v1/responses` body, translated into a chat request; the invariants are in `harness::responses` (`fuzz/harness/`).
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::responses(data));
