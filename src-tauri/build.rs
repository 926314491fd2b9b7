//! Tauri's build step (icons, config, capabilities), only for the `desktop` feature; and,
//! for release builds on x86_64 Linux, the code layout the linker is given.

fn main() {
    #[cfg(feature = "desktop")]
    tauri_build::build();
    link_order();
}

/// Release builds for x86_64 Linux, linked by LLD (Rust's default linker there), place the
/// functions that run at start-up and on the request path first and together
/// (`link-order.txt`, written by `scripts/link_order.py`): the kernel maps code in 64 KiB
/// windows around each page that runs, so scattered among cold code they kept most of the
/// binary's code resident. `GATEHOUSE_LINK_ORDER=0` turns it off (e.g. for another linker).
fn link_order() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=GATEHOUSE_LINK_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let file = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("link-order.txt");
    if var("PROFILE") != "release"
        || var("TARGET") != "x86_64-unknown-linux-gnu"
        || var("GATEHOUSE_LINK_ORDER") == "0"
        || !file.is_file()
    {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        file.display()
    );
    // Names the code no longer has (the file is regenerated now and then) are skipped.
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}
