//! GUI-free pieces of the Gatehouse desktop app, shared by the tray and the `gatehouse`
//! CLI: the OS keychain behind the engine's credential store ([`keychain`]), Claude Code's
//! user settings merged, checked for drift and undone ([`claude_settings`]), and the IT
//! bootstrap file ([`bootstrap`]). Nothing here reads the process environment: paths and
//! variables come in through parameters or the engine's `Environment`.

pub mod app;
pub mod autostart;
pub mod bootstrap;
pub mod central;
pub mod claude_settings;
/// Bodies of the fuzz targets and their corpus tests; not an API.
#[doc(hidden)]
pub mod fuzzing;
pub mod keychain;
pub mod notifier;
pub mod session;
pub mod settings;
pub mod transcripts;
