//! Embeds the built dashboard (`ui/dist`, made by `npm --prefix ui run build`) into the
//! engine: writes `$OUT_DIR/ui_assets.rs`, a table of `(url path, bytes)` pairs with
//! `include_bytes!` of every file. A missing build fails here with the command to run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dist = manifest.join("../../ui/dist");
    println!("cargo:rerun-if-changed={}", dist.display());
    if !dist.join("index.html").is_file() {
        println!(
            "cargo::error=the dashboard is not built ({} is missing): run \
             `npm --prefix ui ci && npm --prefix ui run build` (scripts/setup.sh does it)",
            dist.join("index.html").display()
        );
        return;
    }
    let mut files = Vec::new();
    collect(&dist, &dist, &mut files);
    files.sort();
    let mut out = String::from(
        "/// The built dashboard: URL path (from `/`) and contents.\n\
         pub static UI_ASSETS: &[(&str, &[u8])] = &[\n",
    );
    for (url, file) in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        let _ = writeln!(
            out,
            "    ({url:?}, include_bytes!({:?})),",
            file.display().to_string()
        );
    }
    out.push_str("];\n");
    let target =
        PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("ui_assets.rs");
    if let Err(e) = std::fs::write(&target, out) {
        eprintln!("error: cannot write {}: {e}", target.display());
        std::process::exit(1);
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if let Ok(rel) = path.strip_prefix(root) {
            let url = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let abs = path.canonicalize().unwrap_or(path.clone());
            out.push((format!("/{url}"), abs));
        }
    }
}
