//! Arbitrary bytes as a client's JSON Schema (response_format json_schema and tool parameters); the invariants are in `harness::schema` (`fuzz/harness/`).
#![no_main]

#[path = "../harness/mod.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::schema(data));
