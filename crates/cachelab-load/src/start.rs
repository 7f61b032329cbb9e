//! `--start-at UNIX_TIME_MS`: several instances (on several hosts) start their runs on
//! one instant. Pure: the caller reads the clock.
//!
//! An instant up to [`START_SLACK_MS`] in the past starts the run at once (connecting
//! took a moment, or the harness's clocks differ by a few ms); one further back is
//! refused, since the instances would no longer be together. One more than
//! [`START_HORIZON_MS`] ahead is refused too: it is a mistake (microseconds, or a
//! typo), not a plan.

use std::time::Duration;

use thiserror::Error;

/// How far in the past `--start-at` may be and still start at once.
pub const START_SLACK_MS: u64 = 100;
/// How far ahead `--start-at` may be.
pub const START_HORIZON_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StartError {
    #[error("--start-at: {at} is {late_ms} ms in the past (at most {START_SLACK_MS} ms is allowed, then the run starts at once); give an instant a few seconds ahead")]
    Past { at: u64, late_ms: u64 },
    #[error("--start-at: {at} is {ahead_ms} ms ahead, over a day: it should be a Unix time in milliseconds")]
    TooFar { at: u64, ahead_ms: u64 },
}

/// How long to wait from `now_ms` (Unix ms) until `at_ms`: zero when it has come or
/// passed within the slack.
pub fn wait_for(at_ms: u64, now_ms: u64) -> Result<Duration, StartError> {
    if at_ms >= now_ms {
        let ahead_ms = at_ms - now_ms;
        if ahead_ms > START_HORIZON_MS {
            return Err(StartError::TooFar {
                at: at_ms,
                ahead_ms,
            });
        }
        return Ok(Duration::from_millis(ahead_ms));
    }
    let late_ms = now_ms - at_ms;
    if late_ms > START_SLACK_MS {
        return Err(StartError::Past { at: at_ms, late_ms });
    }
    Ok(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_ahead_is_waited_for() {
        assert_eq!(
            wait_for(10_500, 10_000).unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(wait_for(10_000, 10_000).unwrap(), Duration::ZERO);
    }

    #[test]
    fn an_instant_just_past_starts_at_once_and_one_further_back_is_refused() {
        assert_eq!(
            wait_for(10_000, 10_000 + START_SLACK_MS).unwrap(),
            Duration::ZERO
        );
        let err = wait_for(10_000, 10_001 + START_SLACK_MS).unwrap_err();
        assert_eq!(
            err,
            StartError::Past {
                at: 10_000,
                late_ms: START_SLACK_MS + 1
            }
        );
        assert!(err
            .to_string()
            .starts_with("--start-at: 10000 is 101 ms in the past"));
    }

    #[test]
    fn an_instant_over_a_day_ahead_is_a_mistake() {
        let now = 1_700_000_000_000;
        assert!(wait_for(now + START_HORIZON_MS, now).is_ok());
        assert!(matches!(
            wait_for(now * 1000, now),
            Err(StartError::TooFar { .. })
        ));
    }
}
