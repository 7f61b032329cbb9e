//! What a command is by its name and argument count: routed (with its table entry),
//! answered by the proxy, or refused.

use cachelab_protocol::resp::Command;

use super::error::{unknown, CommandError};
use super::table::{COMMANDS, LOCAL, REFUSED};
use super::{Keys, Kind, Local};

/// Longest command name in the tables; a longer name is unknown without a lookup.
pub(super) const MAX_NAME: usize = 24;

fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = i64::try_from(argc).unwrap_or(i64::MAX);
    let arity = i64::from(arity);
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

/// What `command` is: routed by its keys, answered by the proxy, or refused.
pub fn classify(command: &Command<'_>) -> Result<Kind, CommandError> {
    let name = command.name().unwrap_or_default();
    if name.len() > MAX_NAME {
        return Err(unknown(command));
    }
    let mut lower = [0u8; MAX_NAME];
    lower[..name.len()].copy_from_slice(name);
    lower[..name.len()].make_ascii_lowercase();
    let lower = std::str::from_utf8(&lower[..name.len()]).map_err(|_| unknown(command))?;
    let argc = command.args().len();
    if let Some(spec) = COMMANDS.iter().find(|s| s.name == lower) {
        if !arity_ok(spec.arity, argc) || (spec.keys == Keys::Pairs && argc % 2 == 0) {
            return Err(CommandError::WrongArity(spec.name));
        }
        return Ok(Kind::Routed(spec));
    }
    if let Some(&(name, arity, local)) = LOCAL.iter().find(|(n, _, _)| *n == lower) {
        // Redis's PING has arity -1 and refuses more than one message itself.
        if !arity_ok(arity, argc) || (local == Local::Ping && argc > 2) {
            return Err(CommandError::WrongArity(name));
        }
        return Ok(Kind::Local(local));
    }
    if let Some(&(_, why)) = REFUSED.iter().find(|(n, _)| *n == lower) {
        return Err(CommandError::Refused {
            name: lower.to_ascii_uppercase(),
            why,
        });
    }
    Err(unknown(command))
}
