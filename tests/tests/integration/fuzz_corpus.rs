//! The fuzz corpus as regression tests: every file of `fuzz/corpus/<target>/` (the seeds and
//! each crash the fuzzer found, minimised) goes through the same function the cargo-fuzz
//! target calls (`gatehouse_engine::fuzzing`, `gatehouse_desktop::fuzzing`), so the normal
//! test run checks the fuzzers' invariants on stable Rust without libFuzzer.

#![allow(clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "{}: a target keeps at least five seeds",
        dir.display()
    );
    files
}

/// Runs `body` on every corpus file of `target`, naming the file that fails.
fn run(target: &str, body: impl Fn(&[u8])) {
    for file in corpus(target) {
        let data = std::fs::read(&file).expect("read corpus file");
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&data)));
        if let Err(e) = outcome {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            let name = file.file_name().unwrap_or_default().to_string_lossy();
            panic!("fuzz/corpus/{target}/{name}: {why}");
        }
    }
}

#[test]
fn sse_usage() {
    run("sse_usage", gatehouse_engine::fuzzing::sse_usage);
}

#[test]
fn json_head() {
    run("json_head", gatehouse_engine::fuzzing::json_head);
}

#[test]
fn config() {
    run("config", gatehouse_engine::fuzzing::config);
}

#[test]
fn tokens() {
    run("tokens", gatehouse_engine::fuzzing::tokens);
}

#[test]
fn bootstrap() {
    run("bootstrap", gatehouse_desktop::fuzzing::bootstrap);
}

#[test]
fn claude_settings() {
    let dir = tempfile::tempdir().expect("temp dir");
    run("claude_settings", |data| {
        gatehouse_desktop::fuzzing::claude_settings(dir.path(), data)
    });
}

#[test]
fn chat() {
    run("chat", gatehouse_engine::fuzzing::chat);
}

#[test]
fn openai_answer() {
    run("openai_answer", gatehouse_engine::fuzzing::openai_answer);
}
