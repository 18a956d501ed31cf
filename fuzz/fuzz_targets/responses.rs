//! Arbitrary bytes as a `POST /v1/responses` body, translated into a chat request; the invariants are in `runaii_gateway::fuzzing::responses`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runaii_gateway::fuzzing::responses(data));
