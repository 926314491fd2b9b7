//! The Gatehouse engine: an LLM gateway for Claude Code and other coding agents.
//!
//! The engine has no GUI, keychain or Tauri dependency. Binaries build a validated
//! [`config::Config`], choose their [`deps::Deps`] (clock, credential store, event sink,
//! environment) and call [`start`], which binds, runs background jobs and returns a
//! [`Handle`]. The request pipeline, in the order that gives it its meaning, lives in
//! [`pipeline`].

pub mod admin;
pub mod auth;
pub mod azure;
pub mod breaker;
pub mod config;
pub mod connection_thread;
pub mod console;
pub mod conversation;
pub mod dashboard;
pub mod deps;
pub mod edge;
pub mod error;
pub mod events;
/// Bodies of the fuzz targets and their corpus tests; not an API.
#[doc(hidden)]
pub mod fuzzing;
pub mod gateway;
pub mod google;
pub mod identity;
pub mod inference;
pub mod insight;
pub mod limits;
pub mod local_control;
pub mod memo;
pub mod metering;
pub mod metrics;
pub mod models;
pub mod once;
pub mod outbound;
pub mod pipeline;
pub mod policy;
pub mod readiness;
pub mod secret;
pub mod server;
pub mod spend;
pub mod store;
pub mod telemetry;
pub mod upstream;
pub mod workload;

pub use config::Config;
pub use deps::Deps;
pub use server::{Handle, Serving, StartError, check_config, start, start_with};
