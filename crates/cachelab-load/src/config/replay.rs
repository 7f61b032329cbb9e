//! `--trace FILE` and `--trace-speed S`: how a trace is replayed, checked with the other
//! options (see `engine::replay` for what each way of replaying does).

use std::path::PathBuf;

use super::ConfigError;
use crate::args::Args;

/// A trace to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceReplay {
    pub path: PathBuf,
    /// Trace time is divided by this (1: the trace's own timing, 4: four times faster);
    /// 0: as fast as the connections go (closed loop), or paced by `--rate`.
    pub speed: f64,
}

fn invalid(option: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        option,
        reason: reason.into(),
    }
}

/// The replay asked for, checked against the loop options: timed replay is an open loop
/// of its own, so it takes neither `--rate` nor `--pipeline`.
pub fn replay_options(args: &Args) -> Result<Option<TraceReplay>, ConfigError> {
    let Some(path) = &args.trace else {
        if args.trace_speed.is_some() {
            return Err(invalid("trace-speed", "needs --trace"));
        }
        return Ok(None);
    };
    let speed = match (args.trace_speed, args.rate) {
        (Some(s), _) if !(s >= 0.0 && s.is_finite()) => {
            return Err(invalid(
                "trace-speed",
                format!("{s} must be 0 (as fast as possible) or a positive factor"),
            ))
        }
        (Some(s), Some(_)) if s > 0.0 => {
            return Err(invalid(
                "trace-speed",
                "and --rate both set the pace: --rate sends the records at its schedule, \
                 --trace-speed at the trace's own times",
            ))
        }
        (Some(s), _) => s,
        (None, Some(_)) => 0.0,
        (None, None) => 1.0,
    };
    if speed > 0.0 && args.pipeline != 1 {
        return Err(invalid(
            "pipeline",
            "has no meaning with timed replay: each record is sent at its time, however \
             many requests are outstanding (use --trace-speed 0 for a closed loop)",
        ));
    }
    Ok(Some(TraceReplay {
        path: path.clone(),
        speed,
    }))
}
