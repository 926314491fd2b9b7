//! Fuzz target: an OpenAI-compatible upstream's stream and JSON answer, translated to
//! Anthropic's. The body and its invariants: `gatehouse_engine::fuzzing::openai_answer`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_engine::fuzzing::openai_answer(data));
