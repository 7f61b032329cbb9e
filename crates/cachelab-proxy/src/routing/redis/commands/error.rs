//! The `-ERR` replies of commands that are not sent anywhere: Redis's own texts where
//! Redis has one, the proxy's refusals naming the command and saying why.

use cachelab_protocol::resp::Command;
use thiserror::Error;

use super::Refusal;

/// A command that is not sent anywhere, with the reply it gets. The connection stays
/// usable after every one of them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommandError {
    /// Redis's own text: the name and up to 128 bytes of the arguments.
    #[error("unknown command '{name}', with args beginning with: {args}")]
    Unknown { name: String, args: String },
    #[error("wrong number of arguments for '{0}' command")]
    WrongArity(&'static str),
    #[error("{name} is not supported by cachelab-proxy: {}", .why.reason())]
    Refused { name: String, why: Refusal },
    /// `EVAL` with no keys: nothing says which server should run it.
    #[error("{0} without keys cannot be routed: name at least one key")]
    NoKeys(String),
    /// A command that cannot be split has keys on several servers of the pool.
    #[error("{0} keys are on different servers of the pool: give them one hash tag")]
    CrossServer(String),
    #[error("value is not an integer or out of range")]
    NotAnInteger,
    #[error("Number of keys can't be greater than number of args")]
    TooManyKeys,
    #[error("Number of keys can't be negative")]
    NegativeKeys,
    #[error("at least 1 input key is needed for '{0}' command")]
    NeedsAKey(&'static str),
}

impl CommandError {
    /// The reply line, `-ERR <text>\r\n`, with CR and LF in the text turned into spaces
    /// (as Redis does, so a client's bytes cannot forge a second reply).
    pub fn reply_line(&self) -> Vec<u8> {
        let mut line = b"-ERR ".to_vec();
        line.extend(self.to_string().bytes().map(|b| match b {
            b'\r' | b'\n' => b' ',
            other => other,
        }));
        line.extend_from_slice(b"\r\n");
        line
    }
}

/// Redis's unknown-command error: the name, then the arguments quoted, up to 128 bytes.
/// Redis formats each with C's `%s`, which stops at a NUL byte, so the text does too.
pub(super) fn unknown(command: &Command<'_>) -> CommandError {
    let text = |b: &[u8]| {
        let end = memchr::memchr(0, b).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let name = command.name().map(text).unwrap_or_default();
    let mut args = String::new();
    for arg in command.args().iter().skip(1) {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        let shown = &arg[..arg.len().min(room)];
        args.push_str(&format!("'{}' ", text(shown)));
    }
    CommandError::Unknown {
        name: name.chars().take(128).collect(),
        args,
    }
}
