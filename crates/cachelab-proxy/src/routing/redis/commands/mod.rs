//! The Redis command table as a pool routes it.
//!
//! A command is routed by its keys: the table says where they are ([`Keys`]), whether
//! the command writes (a `replicate` pool sends writes to every server and reads to one),
//! and how a command whose keys lie on several servers is split ([`Split`]). Arities are
//! Redis 7's (negative: at least that many), checked here because the key positions
//! depend on them. Commands that no key routes are either answered by the proxy
//! ([`Local`]) or refused with an `-ERR` naming them ([`Refusal`]); a refusal leaves the
//! connection usable (twemproxy closes it).

use cachelab_protocol::resp::Command;
use thiserror::Error;

mod table;

pub use table::COMMANDS;
use table::{LOCAL, REFUSED};

/// Whether a command changes data: writes go to every server of a `replicate` pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Where a command's keys are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Argument 1.
    First,
    /// Arguments 1 and 2 (`RPOPLPUSH src dst`, `SMOVE src dst member`, `RENAME`).
    FirstTwo,
    /// Every argument after the name (`MGET`, `DEL`, `SUNION`, ...).
    All,
    /// Arguments 1, 3, 5, ...: the keys of key-value pairs (`MSET`).
    Pairs,
    /// A destination at 1, a count at 2, then that many keys (`ZUNIONSTORE`).
    DestAndCounted,
    /// A count at 2, then that many keys (`EVAL script numkeys key...`).
    Counted,
}

/// How a command whose keys lie on several servers is cut and put back together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Not split: every key must be on one server, else the command is refused.
    Never,
    /// One command per server with its keys; the values merged in the client's key order
    /// (`MGET`).
    Values,
    /// One command per server with its keys; the integer replies summed (`DEL`, `UNLINK`,
    /// `EXISTS`, `TOUCH`).
    Sum,
    /// One command per server with its key-value pairs; `+OK` when every part is `+OK`
    /// (`MSET`).
    AllOk,
}

/// One routed command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Lower case, as Redis names commands in its errors.
    pub name: &'static str,
    /// Redis's arity: the argument count including the name; negative means at least.
    pub arity: i32,
    pub access: Access,
    pub keys: Keys,
    pub split: Split,
}

/// Commands the proxy answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// `+PONG`, or the argument as a bulk string.
    Ping,
    /// The argument as a bulk string.
    Echo,
    /// `+OK`, then the connection closes.
    Quit,
    /// `+OK` for the pool's database; servers are on it already.
    Select,
    /// Checked against the pool's `redis_auth`.
    Auth,
    /// The proxy's own counters in Redis's `INFO` text format.
    Info,
}

/// Why a command cannot be routed by a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Transaction,
    PubSub,
    Blocking,
    WholeKeyspace,
    Scripting,
    ServerAdmin,
    Connection,
}

impl Refusal {
    fn reason(self) -> &'static str {
        match self {
            Refusal::Transaction => "transactions cannot span the servers of a pool",
            Refusal::PubSub => "pub/sub is not routed by key",
            Refusal::Blocking => {
                "blocking commands would hold a server connection shared by other clients"
            }
            Refusal::WholeKeyspace => "it reads or changes every key of one server, not the pool's",
            Refusal::Scripting => "scripts and functions are routed only by EVAL's keys",
            Refusal::ServerAdmin => "it administers one server, not the pool",
            Refusal::Connection => "server connections are shared by the proxy's clients",
        }
    }
}

/// What a command is, for routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Routed(&'static Spec),
    Local(Local),
}

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

/// Longest command name in the tables; a longer name is unknown without a lookup.
const MAX_NAME: usize = 24;

fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = i64::try_from(argc).unwrap_or(i64::MAX);
    let arity = i64::from(arity);
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

/// Redis's unknown-command error: the name, then the arguments quoted, up to 128 bytes.
fn unknown(command: &Command<'_>) -> CommandError {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
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
        if !arity_ok(arity, argc) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn command(args: &[&str]) -> Command<'static> {
        Command::new(
            args.iter()
                .map(|a| Cow::Owned(a.as_bytes().to_vec()))
                .collect(),
        )
    }

    fn kind(args: &[&str]) -> Result<Kind, CommandError> {
        classify(&command(args))
    }

    fn reply(args: &[&str]) -> String {
        String::from_utf8(kind(args).unwrap_err().reply_line()).unwrap()
    }

    fn keys_of(args: &[&str]) -> Result<Vec<usize>, CommandError> {
        let c = command(args);
        let Kind::Routed(spec) = classify(&c)? else {
            panic!("{args:?} is not routed")
        };
        key_args(spec, &c).map(|k| k.iter().collect())
    }

    #[test]
    fn command_names_match_in_any_case() {
        for name in ["GET", "get", "GeT"] {
            assert!(matches!(kind(&[name, "k"]), Ok(Kind::Routed(s)) if s.name == "get"));
        }
    }

    #[test]
    fn the_table_has_each_name_once_and_in_lower_case() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|s| s.name).collect();
        names.extend(LOCAL.iter().map(|l| l.0));
        names.extend(REFUSED.iter().map(|r| r.0));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "a name is in two tables");
        assert!(names
            .iter()
            .all(|n| n.len() <= MAX_NAME && *n == n.to_ascii_lowercase()));
    }

    #[test]
    fn a_single_key_command_has_its_key_at_argument_one() {
        assert_eq!(keys_of(&["SET", "k", "v", "EX", "10"]), Ok(vec![1]));
        assert_eq!(keys_of(&["HGET", "h", "f"]), Ok(vec![1]));
    }

    #[test]
    fn mget_del_exists_touch_unlink_take_every_argument_as_a_key() {
        for name in ["MGET", "DEL", "EXISTS", "TOUCH", "UNLINK"] {
            assert_eq!(keys_of(&[name, "a", "b", "c"]), Ok(vec![1, 2, 3]), "{name}");
        }
    }

    #[test]
    fn multi_key_commands_split_by_their_rule() {
        let split = |name: &str| match kind(&[name, "a", "1", "b", "2"]) {
            Ok(Kind::Routed(s)) => s.split,
            other => panic!("{other:?}"),
        };
        assert_eq!(split("MGET"), Split::Values);
        for name in ["DEL", "UNLINK", "EXISTS", "TOUCH"] {
            assert_eq!(split(name), Split::Sum, "{name}");
        }
        assert_eq!(split("MSET"), Split::AllOk);
        assert_eq!(split("SUNION"), Split::Never);
    }

    #[test]
    fn mset_keys_are_the_first_of_each_pair_and_pairs_must_be_whole() {
        assert_eq!(keys_of(&["MSET", "a", "1", "b", "2"]), Ok(vec![1, 3]));
        assert_eq!(
            reply(&["MSET", "a", "1", "b"]),
            "-ERR wrong number of arguments for 'mset' command\r\n"
        );
    }

    #[test]
    fn wrong_arity_is_redis_s_error_with_the_lower_case_name() {
        assert_eq!(
            reply(&["GET"]),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
        assert_eq!(
            reply(&["GET", "a", "b"]),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
        assert_eq!(
            reply(&["ECHO"]),
            "-ERR wrong number of arguments for 'echo' command\r\n"
        );
    }

    #[test]
    fn reads_and_writes_are_told_apart() {
        let access = |args: &[&str]| match kind(args) {
            Ok(Kind::Routed(s)) => s.access,
            other => panic!("{other:?}"),
        };
        assert_eq!(access(&["GET", "k"]), Access::Read);
        assert_eq!(access(&["MGET", "k"]), Access::Read);
        assert_eq!(access(&["SET", "k", "v"]), Access::Write);
        assert_eq!(access(&["INCR", "k"]), Access::Write);
        assert_eq!(access(&["DEL", "k"]), Access::Write);
    }

    #[test]
    fn ping_echo_quit_select_auth_info_are_answered_by_the_proxy() {
        assert_eq!(kind(&["PING"]), Ok(Kind::Local(Local::Ping)));
        assert_eq!(kind(&["ping", "hi"]), Ok(Kind::Local(Local::Ping)));
        assert_eq!(kind(&["ECHO", "x"]), Ok(Kind::Local(Local::Echo)));
        assert_eq!(kind(&["QUIT"]), Ok(Kind::Local(Local::Quit)));
        assert_eq!(kind(&["SELECT", "0"]), Ok(Kind::Local(Local::Select)));
        assert_eq!(kind(&["AUTH", "pw"]), Ok(Kind::Local(Local::Auth)));
        assert_eq!(kind(&["INFO"]), Ok(Kind::Local(Local::Info)));
    }

    #[test]
    fn refused_commands_name_themselves_and_say_why() {
        let cases = [
            (&["MULTI"][..], "MULTI", "transactions"),
            (&["WATCH", "k"], "WATCH", "transactions"),
            (&["SUBSCRIBE", "c"], "SUBSCRIBE", "pub/sub"),
            (&["BLPOP", "l", "0"], "BLPOP", "blocking"),
            (&["KEYS", "*"], "KEYS", "every key"),
            (&["SCAN", "0"], "SCAN", "every key"),
            (&["FLUSHALL"], "FLUSHALL", "every key"),
            (&["CONFIG", "GET", "x"], "CONFIG", "administers"),
        ];
        for (args, name, why) in cases {
            let line = reply(args);
            assert!(
                line.starts_with(&format!("-ERR {name} is not supported by cachelab-proxy: ")),
                "{line}"
            );
            assert!(line.contains(why), "{line}");
            assert!(line.ends_with("\r\n") && line.matches('\n').count() == 1);
        }
    }

    #[test]
    fn unknown_commands_get_redis_s_text_with_their_arguments() {
        assert_eq!(
            reply(&["FOO", "a", "b"]),
            "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
        );
        assert_eq!(
            reply(&["x".repeat(40).as_str()]),
            format!(
                "-ERR unknown command '{}', with args beginning with: \r\n",
                "x".repeat(40)
            )
        );
    }

    #[test]
    fn a_client_s_newlines_cannot_forge_a_second_reply() {
        let line = reply(&["FOO\r\n+OK", "a\r\nb"]);
        assert_eq!(line.matches('\n').count(), 1, "{line:?}");
        assert!(line.ends_with("\r\n"));
    }

    #[test]
    fn unknown_arguments_are_cut_at_128_bytes() {
        let long = "a".repeat(300);
        let line = reply(&["FOO", &long, "b"]);
        assert!(line.contains(&format!("'{}' ", "a".repeat(128))), "{line}");
        assert!(!line.contains("'b'"), "{line}");
    }

    #[test]
    fn eval_routes_by_its_counted_keys() {
        assert_eq!(
            keys_of(&["EVAL", "return 1", "2", "a", "b", "arg"]),
            Ok(vec![3, 4])
        );
        assert_eq!(keys_of(&["EVALSHA", "abc", "1", "k"]), Ok(vec![3]));
    }

    #[test]
    fn eval_without_keys_is_refused_with_its_name() {
        let c = command(&["EVAL", "return 1", "0"]);
        let Ok(Kind::Routed(spec)) = classify(&c) else {
            panic!()
        };
        let err = key_args(spec, &c).unwrap_err();
        assert_eq!(
            String::from_utf8(err.reply_line()).unwrap(),
            "-ERR EVAL without keys cannot be routed: name at least one key\r\n"
        );
    }

    #[test]
    fn eval_counts_are_checked_with_redis_s_texts() {
        assert_eq!(
            keys_of(&["EVAL", "s", "x"]),
            Err(CommandError::NotAnInteger)
        );
        assert_eq!(
            keys_of(&["EVAL", "s", "-1"]),
            Err(CommandError::NegativeKeys)
        );
        assert_eq!(
            keys_of(&["EVAL", "s", "3", "a", "b"]),
            Err(CommandError::TooManyKeys)
        );
    }

    #[test]
    fn zunionstore_keys_are_its_destination_and_its_counted_sources() {
        assert_eq!(
            keys_of(&["ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"]),
            Ok(vec![1, 3, 4])
        );
        assert_eq!(
            keys_of(&["ZINTERSTORE", "d", "0", "a"]),
            Err(CommandError::NeedsAKey("zinterstore"))
        );
    }

    #[test]
    fn key_args_count_matches_the_keys_listed() {
        for args in [
            &["MSET", "a", "1", "b", "2", "c", "3"][..],
            &["MGET", "a"],
            &["ZUNIONSTORE", "d", "2", "a", "b"],
            &["RPOPLPUSH", "a", "b"],
        ] {
            let c = command(args);
            let Ok(Kind::Routed(spec)) = classify(&c) else {
                panic!()
            };
            let keys = key_args(spec, &c).unwrap();
            assert_eq!(keys.count(), keys.iter().count(), "{args:?}");
        }
    }
}
