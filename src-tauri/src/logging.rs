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

/// Installs the operator log subscriber. Keep the guard alive until exit.
pub fn init(cfg: &LoggingConfig) -> Result<Option<WorkerGuard>, String> {
    let filter =
        EnvFilter::try_from_env("GATEHOUSE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(false);
    match appender(cfg, "gatehouse")? {
        Some(file) => {
            let (writer, guard) = tracing_appender::non_blocking(file);
            builder
                .with_writer(std::io::stderr.and(writer))
                .try_init()
                .map_err(|e| e.to_string())?;
            Ok(Some(guard))
        }
        None => {
            builder
                .with_writer(std::io::stderr)
                .try_init()
                .map_err(|e| e.to_string())?;
            Ok(None)
        }
    }
}

/// JSON events also go to `events.*.log` when file logging is on.
pub fn event_file_sink(cfg: &LoggingConfig) -> Result<Option<Arc<dyn EventSink>>, String> {
    Ok(appender(cfg, "events")?
        .map(|file| Arc::new(WriterEventSink(Mutex::new(file))) as Arc<dyn EventSink>))
}
