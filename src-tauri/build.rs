//! Tauri's build step (icons, config, capabilities), only for the `desktop` feature.

fn main() {
    #[cfg(feature = "desktop")]
    tauri_build::build();
}
