//! Fuzz target: the IT bootstrap file, as JSON and as YAML.
//! The body and its invariants: `gatehouse_desktop::fuzzing::bootstrap`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_desktop::fuzzing::bootstrap(data));
