//! Fuzz target: presented credentials: bearer parsing, client keys, session and workload tokens, sealed values.
//! The body and its invariants: `gatehouse_engine::fuzzing::tokens`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_engine::fuzzing::tokens(data));
