//! Fuzz target: config loading from YAML: `${...}` expansion and validation.
//! The body and its invariants: `gatehouse_engine::fuzzing::config`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_engine::fuzzing::config(data));
