//! Operator log lines (tracing, human-readable, on stderr) and optional rotating files via
//! `tracing-appender`: `gatehouse.log` for operator lines and `events.log` for JSON events.

use std::sync::{Arc, Mutex};

use gatehouse_engine::config::{LoggingConfig, Rotation};
use gatehouse_engine::events::{EventSink, WriterEventSink};
use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{RollingFileAppender, Rotation as AppenderRotation};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::MakeWriterExt;

fn appender(cfg: &LoggingConfig, name: &str) -> Result<Option<RollingFileAppender>, String> {
    let Some((dir, rotation)) = &cfg.dir else {
        return Ok(None);
    };
    let rotation = match rotation {
        Rotation::Daily => AppenderRotation::DAILY,
        Rotation::Hourly => AppenderRotation::HOURLY,
        Rotation::Never => AppenderRotation::NEVER,
    };
    RollingFileAppender::builder()
        .rotation(rotation)
        .filename_prefix(name)
        .filename_suffix("log")
        .build(dir)
        .map(Some)
        .map_err(|e| format!("logging.dir {}: {e}", dir.display()))
}

/// The level filter: `GATEHOUSE_LOG` (a tracing directive), else the reference's
/// `CLAUDE_GATEWAY_LOG_LEVEL` (`debug`, `info`, `warn` or `error`), else `info`.
fn filter() -> EnvFilter {
    if let Ok(f) = EnvFilter::try_from_env("GATEHOUSE_LOG") {
        return f;
    }
    let level = std::env::var("CLAUDE_GATEWAY_LOG_LEVEL")
        .map(|l| l.to_ascii_lowercase())
        .ok()
        .filter(|l| ["debug", "info", "warn", "error"].contains(&l.as_str()));
    EnvFilter::new(level.as_deref().unwrap_or("info"))
}

/// JSON lines instead of text, as the reference's `CLAUDE_GATEWAY_LOG_FORMAT=json`.
fn json_lines() -> bool {
    std::env::var("CLAUDE_GATEWAY_LOG_FORMAT").is_ok_and(|f| f.eq_ignore_ascii_case("json"))
}

/// Installs the operator log subscriber. Keep the guard alive until exit.
pub fn init(cfg: &LoggingConfig) -> Result<Option<WorkerGuard>, String> {
    init_buffered(
        cfg,
        tracing_appender::non_blocking::DEFAULT_BUFFERED_LINES_LIMIT,
    )
}

/// [`init`] with at most `lines` waiting for the log file's writer thread (past it, lines
/// are dropped, not waited for). tracing-appender's default, 128,000, allocates and touches
/// 4 MB up front; the desktop's processes, which log a few lines a minute, take less.
pub fn init_buffered(cfg: &LoggingConfig, lines: usize) -> Result<Option<WorkerGuard>, String> {
    let (writer, guard) = match appender(cfg, "gatehouse")? {
        Some(file) => {
            let (file, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
                .buffered_lines_limit(lines)
                .finish(file);
            (
                tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr.and(file)),
                Some(guard),
            )
        }
        None => (
            tracing_subscriber::fmt::writer::BoxMakeWriter::new(std::io::stderr),
            None,
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_target(false)
        .with_ansi(false)
        .with_writer(writer);
    let installed = if json_lines() {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    installed.map_err(|e| e.to_string())?;
    Ok(guard)
}

/// JSON events also go to `events.*.log` when file logging is on.
pub fn event_file_sink(cfg: &LoggingConfig) -> Result<Option<Arc<dyn EventSink>>, String> {
    Ok(appender(cfg, "events")?
        .map(|file| Arc::new(WriterEventSink(Mutex::new(file))) as Arc<dyn EventSink>))
}
