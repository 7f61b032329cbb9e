//! The plain log (info, warnings, errors), to stderr or a file, written off the hot path.

use std::path::Path;

use tracing::Subscriber;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

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
    subscriber(level, writer).init();
    Ok(guard)
}

/// A `--log-level` that names no level.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a log level: give one of trace, debug, info, warn, error, off, or target=level directives separated by commas (cachelab_proxy=debug,warn)")]
pub struct BadLevel(String);

/// `--log-level`: a level (`debug`) or directives by target (`cachelab_proxy=debug,warn`).
///
/// `Targets` rather than `EnvFilter`: the same directives without regular expressions,
/// so the proxy does not depend on `regex-syntax`, whose features the tests' proptest
/// widens (that made `cargo build` after `cargo test` compile the proxy a second time).
/// A bare word that is no level would parse as a target of its own and silence the log,
/// so it is refused.
pub fn filter(level: &str) -> Result<Targets, BadLevel> {
    let bad = || BadLevel(level.to_string());
    for directive in level.split(',') {
        let named = match directive.split_once('=') {
            Some((target, level)) => !target.is_empty() && is_level(level),
            None => is_level(directive),
        };
        if !named {
            return Err(bad());
        }
    }
    level.parse().map_err(|_| bad())
}

/// A level's name or number (tracing also reads an empty string as `error`).
fn is_level(s: &str) -> bool {
    !s.is_empty() && s.parse::<LevelFilter>().is_ok()
}

/// The proxy's log format written to `writer`, filtered by `level` (checked by the
/// command line; `info` if it is not a level) for the binary, and for the in-process
/// tests with a writer of their own.
pub fn subscriber<W>(level: &str, writer: W) -> impl Subscriber + Send + Sync + 'static
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .with_max_level(LevelFilter::TRACE)
        .with_writer(writer)
        .with_ansi(false)
        .with_target(false)
        .finish()
        .with(filter(level).unwrap_or_else(|_| Targets::new().with_default(LevelFilter::INFO)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_a_directive_list_or_nonsense() {
        assert_eq!(
            filter("debug").unwrap().default_level(),
            Some(LevelFilter::DEBUG)
        );
        let by_target = filter("cachelab_proxy=debug,warn").unwrap();
        assert!(by_target.would_enable("cachelab_proxy::health", &tracing::Level::DEBUG));
        assert!(!by_target.would_enable("tokio", &tracing::Level::INFO));
        for nonsense in ["loud!", "", "debug,", "=debug", "cachelab_proxy=loud"] {
            let e = filter(nonsense).unwrap_err().to_string();
            assert!(e.contains("is not a log level"), "{nonsense}: {e}");
        }
    }
}
