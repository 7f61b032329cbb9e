//! The Redis command table as a pool routes it.
//!
//! A command is routed by its keys: the table says where they are ([`Keys`]), whether
//! the command writes (a `replicate` pool sends writes to every server and reads to one),
//! and how a command whose keys lie on several servers is split ([`Split`]). Arities are
//! Redis 7's (negative: at least that many), checked here because the key positions
//! depend on them. Commands that no key routes are either answered by the proxy
//! ([`Local`]) or refused with an `-ERR` naming them ([`Refusal`]); a refusal leaves the
//! connection usable (twemproxy closes it).

mod classify;
mod error;
mod keys;
mod table;

pub use classify::classify;
pub use error::CommandError;
pub use keys::{key_args, KeyArgs};
pub use table::COMMANDS;

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

#[cfg(test)]
mod tests {
    use super::classify::MAX_NAME;
    use super::table::{LOCAL, REFUSED};
    use super::*;
    use cachelab_protocol::resp::Command;
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
    fn unknown_command_text_stops_at_a_nul_byte_as_redis_s_printf_does() {
        assert_eq!(
            reply(&["FO\0O", "a\0b", "c"]),
            "-ERR unknown command 'FO', with args beginning with: 'a' 'c' \r\n"
        );
    }

    #[test]
    fn ping_takes_at_most_one_message() {
        assert_eq!(
            reply(&["PING", "a", "b"]),
            "-ERR wrong number of arguments for 'ping' command\r\n"
        );
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
