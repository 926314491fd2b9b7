//! Fuzz target: the OpenAI front door's request translation and stream translation.
//! The body and its invariants: `gatehouse_engine::fuzzing::chat`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_engine::fuzzing::chat(data));
