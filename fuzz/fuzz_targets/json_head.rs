//! Fuzz target: the request body head parser (`model`, `stream`, `max_tokens`) and the model rewrite.
//! The body and its invariants: `gatehouse_engine::fuzzing::json_head`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_engine::fuzzing::json_head(data));
