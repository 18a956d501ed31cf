//! Arbitrary bytes as a `POST /v1/messages` body (Anthropic), translated into a chat request; the invariants are in `harness::messages` (`fuzz/harness/`).
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::messages(data));
