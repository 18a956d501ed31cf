//! Arbitrary bytes as a client's JSON Schema (response_format json_schema and tool parameters); the invariants are in `runaii_gateway::fuzzing::schema`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| runaii_gateway::fuzzing::schema(data));
