//! The plain log (info, warnings, errors), to stderr or a file, written off the hot path.

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; keep the guard alive until exit so the last lines
/// are flushed.
pub fn init(log_file: Option<&Path>, level: &str) -> std::io::Result<WorkerGuard> {
    let (writer, guard) = match log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            tracing_appender::non_blocking(file)
        }
        None => tracing_appender::non_blocking(std::io::stderr()),
    };
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(false)
        .with_target(false)
        .init();
    Ok(guard)
}
