//! Fuzz target: the Claude Code settings merge (configure, status, undo) on real files in a
//! private temporary directory.
//! The body and its invariants: `gatehouse_desktop::fuzzing::claude_settings`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

/// One directory per fuzzing process (libFuzzer's jobs and forks are processes).
fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("gatehouse-fuzz-claude-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create the fuzzing directory");
        d
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_desktop::fuzzing::claude_settings(dir(), data));
