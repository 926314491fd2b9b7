//! `gatehouse-statusline [--data-dir DIR]`: Claude Code's `statusLine` command. Reads
//! Claude Code's status JSON on stdin and prints one line; always exits 0. Without
//! `--data-dir`, the tray's default data directory.

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
    gatehouse_statusline::run(data_dir().as_deref());
}
