//! Fuzz target: SSE (and JSON) usage scanner and the pricing of what it reads.
//! The body and its invariants: `gatehouse_engine::fuzzing::sse_usage`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_engine::fuzzing::sse_usage(data));
