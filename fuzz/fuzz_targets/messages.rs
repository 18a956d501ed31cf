//! Arbitrary bytes as a `POST /v1/messages` body (Anthropic), translated into a chat request; the invariants are in `runaii_gateway::fuzzing::messages`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runaii_gateway::fuzzing::messages(data));
