//! Arbitrary bytes as a `POST /v1/chat/completions` body; the invariants are in `runaii_gateway::fuzzing::chat`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runaii_gateway::fuzzing::chat(data));
