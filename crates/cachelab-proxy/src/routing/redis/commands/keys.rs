//! Where a routed command's keys are among its arguments, by its table entry's
//! [`Keys`] rule (counted forms checked as Redis checks them).

use cachelab_protocol::resp::Command;

use super::error::CommandError;
use super::{Keys, Spec};

/// The argument indices of a routed command's keys, in the client's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyArgs {
    /// A key before the run (`ZUNIONSTORE`'s destination).
    pub first: Option<usize>,
    pub start: usize,
    pub end: usize,
    pub step: usize,
}

impl KeyArgs {
    pub fn iter(self) -> impl Iterator<Item = usize> + Clone {
        self.first
            .into_iter()
            .chain((self.start..self.end).step_by(self.step))
    }

    pub fn count(self) -> usize {
        usize::from(self.first.is_some()) + (self.end - self.start).div_ceil(self.step)
    }
}

/// Where the keys of `command` (classified as `spec`) are. Fails only for the counted
/// forms, whose count argument Redis checks with these same texts.
pub fn key_args(spec: &Spec, command: &Command<'_>) -> Result<KeyArgs, CommandError> {
    let argc = command.args().len();
    let run = |start: usize, end: usize, step: usize| KeyArgs {
        first: None,
        start,
        end,
        step,
    };
    let counted = |at: usize| -> Result<usize, CommandError> {
        let text = command.arg(at).unwrap_or_default();
        let n: i64 = std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or(CommandError::NotAnInteger)?;
        if n < 0 {
            return Err(CommandError::NegativeKeys);
        }
        let n = usize::try_from(n).map_err(|_| CommandError::TooManyKeys)?;
        if n > argc - at - 1 {
            return Err(CommandError::TooManyKeys);
        }
        Ok(n)
    };
    Ok(match spec.keys {
        Keys::First => run(1, 2, 1),
        Keys::FirstTwo => run(1, 3, 1),
        Keys::All => run(1, argc, 1),
        Keys::Pairs => run(1, argc, 2),
        Keys::DestAndCounted => {
            let n = counted(2).map_err(|e| match e {
                CommandError::NegativeKeys | CommandError::TooManyKeys => {
                    CommandError::NeedsAKey(spec.name)
                }
                other => other,
            })?;
            if n == 0 {
                return Err(CommandError::NeedsAKey(spec.name));
            }
            KeyArgs {
                first: Some(1),
                ..run(3, 3 + n, 1)
            }
        }
        Keys::Counted => {
            let n = counted(2)?;
            if n == 0 {
                return Err(CommandError::NoKeys(spec.name.to_ascii_uppercase()));
            }
            run(3, 3 + n, 1)
        }
    })
}
