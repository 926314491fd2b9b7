//! `gatehouse-statusline [--data-dir DIR]`: Claude Code's `statusLine` command. Reads
//! Claude Code's status JSON on stdin and prints one line; always exits 0. Without
//! `--data-dir`, the tray's default data directory.

use std::io::{Read, Write};
use std::path::PathBuf;

fn data_dir() -> Option<PathBuf> {
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        if a == "--data-dir" {
            return args.next().map(PathBuf::from);
        }
    }
    gatehouse_statusline::default_data_dir()
}

fn main() {
    let mut input = Vec::new();
    let _ = std::io::stdin()
        .take(gatehouse_statusline::MAX_STDIN)
        .read_to_end(&mut input);
    let line = match data_dir() {
        Some(dir) => gatehouse_statusline::line(&dir, &input),
        None => gatehouse_statusline::FALLBACK.to_owned(),
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}
