//! Where a Redis command's keys go in a `shard` pool, the per-server commands a
//! multi-key command is cut into, and how their replies merge back ([`merge`]).
//!
//! Placement is twemproxy's, the same as for memcached pools: the key (or the part of it
//! between the pool's `hash_tag` characters) hashed with the pool's hash, on the pool's
//! distribution; with `auto_eject_hosts` a key whose server is ejected goes to the next
//! live server on the ring.

use bytes::BufMut;
use cachelab_protocol::resp::{put_array_header, put_bulk, Command};

use super::commands::{CommandError, KeyArgs, Spec, Split};
use crate::routing::plan::{Alive, Pool, ServerId};

pub mod merge;

pub use merge::{merge_parts, merge_resp_parts, MergeError};

/// The server a key is on, as twemproxy places it.
pub fn key_server(pool: &Pool, key: &[u8], alive: &impl Alive) -> ServerId {
    let mut walk = pool.key_servers(key).map(|m| pool.servers[m].id).peekable();
    let home = *walk.peek().expect("a pool has servers");
    if pool.auto_eject {
        walk.find(|&s| !alive.is_ejected(s)).unwrap_or(home)
    } else {
        home
    }
}

/// A command's keys grouped by server: the servers in order of first use, and for each
/// key (in the client's order) the index of its group. Reused across requests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Groups {
    pub servers: Vec<ServerId>,
    pub key_groups: Vec<u32>,
}

impl Groups {
    pub fn clear(&mut self) {
        self.servers.clear();
        self.key_groups.clear();
    }

    /// The argument indices of group `group`'s keys, in the client's order.
    pub fn keys_of(&self, keys: KeyArgs, group: usize) -> impl Iterator<Item = usize> + '_ {
        keys.iter()
            .zip(&self.key_groups)
            .filter(move |(_, g)| **g as usize == group)
            .map(|(arg, _)| arg)
    }
}

/// Groups the keys of `command` by server into `groups` (cleared first). A command that
/// cannot be split ([`Split::Never`]) must have every key on one server.
pub fn group_keys(
    pool: &Pool,
    spec: &Spec,
    command: &Command<'_>,
    keys: KeyArgs,
    alive: &impl Alive,
    groups: &mut Groups,
) -> Result<(), CommandError> {
    groups.clear();
    for arg in keys.iter() {
        let server = key_server(pool, command.arg(arg).unwrap_or_default(), alive);
        let group = match groups.servers.iter().position(|&s| s == server) {
            Some(g) => g,
            None => {
                groups.servers.push(server);
                groups.servers.len() - 1
            }
        };
        groups.key_groups.push(group as u32);
    }
    if spec.split == Split::Never && groups.servers.len() > 1 {
        return Err(CommandError::CrossServer(spec.name.to_ascii_uppercase()));
    }
    Ok(())
}

/// Writes group `group`'s part of a split command: the name, then the group's keys
/// (with their values, for [`Split::AllOk`]'s key-value pairs).
pub fn compose_part(
    command: &Command<'_>,
    spec: &Spec,
    keys: KeyArgs,
    groups: &Groups,
    group: usize,
    out: &mut impl BufMut,
) {
    let per_key = if spec.split == Split::AllOk { 2 } else { 1 };
    let count = groups
        .key_groups
        .iter()
        .filter(|g| **g as usize == group)
        .count();
    put_array_header(out, 1 + count * per_key);
    put_bulk(out, command.name().unwrap_or_default());
    for arg in groups.keys_of(keys, group) {
        for i in arg..arg + per_key {
            put_bulk(out, command.arg(i).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::hash::Hash;
    use crate::routing::plan::{Mode, ReadPolicy};
    use crate::routing::redis::commands::{classify, key_args, Kind};
    use crate::routing::ring::Distribution;
    use crate::routing::test_support::{none, servers, Ejected};
    use std::borrow::Cow;
    use std::time::Duration;

    fn pool(n: usize, tag: Option<[u8; 2]>, auto_eject: bool) -> Pool {
        Pool::new(
            "r".into(),
            servers(n, 7000),
            Mode::Shard { replicas: 1 },
            Hash::Fnv1a64,
            tag,
            Distribution::Ketama,
            auto_eject,
            ReadPolicy::Primary,
            Duration::from_secs(1),
        )
    }

    fn command(args: &[&str]) -> Command<'static> {
        Command::new(
            args.iter()
                .map(|a| Cow::Owned(a.as_bytes().to_vec()))
                .collect(),
        )
    }

    /// Groups `args` in `pool`: the spec, the key positions and the groups.
    fn grouped(
        pool: &Pool,
        args: &[&str],
    ) -> (&'static Spec, KeyArgs, Result<Groups, CommandError>) {
        let c = command(args);
        let Ok(Kind::Routed(spec)) = classify(&c) else {
            panic!("{args:?}")
        };
        let keys = key_args(spec, &c).unwrap();
        let mut groups = Groups::default();
        let result = group_keys(pool, spec, &c, keys, &none(), &mut groups).map(|_| groups);
        (spec, keys, result)
    }

    /// Keys named k0, k1, ... until two of them are on different servers.
    fn two_keys_on_two_servers(pool: &Pool) -> (String, String) {
        let first = "k0".to_string();
        let home = key_server(pool, first.as_bytes(), &none());
        let other = (1..)
            .map(|i| format!("k{i}"))
            .find(|k| key_server(pool, k.as_bytes(), &none()) != home)
            .unwrap();
        (first, other)
    }

    #[test]
    fn keys_with_one_hash_tag_are_on_one_server() {
        let p = pool(5, Some(*b"{}"), false);
        let home = key_server(&p, b"{user1}:a", &none());
        for key in ["{user1}:b", "x{user1}", "{user1}", "user1"] {
            assert_eq!(key_server(&p, key.as_bytes(), &none()), home, "{key}");
        }
    }

    #[test]
    fn without_auto_eject_a_key_stays_on_its_ejected_server() {
        let p = pool(3, None, false);
        let home = key_server(&p, b"key", &none());
        assert_eq!(key_server(&p, b"key", &Ejected([home].into())), home);
    }

    #[test]
    fn with_auto_eject_a_key_moves_to_the_next_live_server_on_the_ring() {
        let p = pool(3, None, true);
        let home = key_server(&p, b"key", &none());
        let moved = key_server(&p, b"key", &Ejected([home].into()));
        assert_ne!(moved, home);
        let walk: Vec<ServerId> = p.key_servers(b"key").map(|m| p.servers[m].id).collect();
        assert_eq!(moved, walk[1]);
    }

    #[test]
    fn mget_parts_carry_each_server_s_keys_in_client_order() {
        let p = pool(3, None, false);
        let (a, b) = two_keys_on_two_servers(&p);
        let args = ["MGET", &a, &b, &a];
        let (spec, keys, groups) = grouped(&p, &args);
        let groups = groups.unwrap();
        assert_eq!(groups.key_groups, vec![0, 1, 0]);
        let c = command(&args);
        let mut part = Vec::new();
        compose_part(&c, spec, keys, &groups, 0, &mut part);
        let expected = format!("*3\r\n$4\r\nMGET\r\n$2\r\n{a}\r\n$2\r\n{a}\r\n");
        assert_eq!(String::from_utf8(part).unwrap(), expected);
    }

    #[test]
    fn mset_parts_carry_each_key_with_its_value() {
        let p = pool(3, None, false);
        let (a, b) = two_keys_on_two_servers(&p);
        let args = ["MSET", &a, "1", &b, "2"];
        let (spec, keys, groups) = grouped(&p, &args);
        let groups = groups.unwrap();
        let mut part = Vec::new();
        compose_part(&command(&args), spec, keys, &groups, 1, &mut part);
        let expected = format!("*3\r\n$4\r\nMSET\r\n${}\r\n{b}\r\n$1\r\n2\r\n", b.len());
        assert_eq!(String::from_utf8(part).unwrap(), expected);
    }

    #[test]
    fn a_command_that_cannot_split_is_refused_when_its_keys_are_on_two_servers() {
        let p = pool(3, None, false);
        let (a, b) = two_keys_on_two_servers(&p);
        let (_, _, result) = grouped(&p, &["SUNION", &a, &b]);
        let err = result.unwrap_err();
        assert_eq!(
            String::from_utf8(err.reply_line()).unwrap(),
            "-ERR SUNION keys are on different servers of the pool: give them one hash tag\r\n"
        );
        let tagged = pool(3, Some(*b"{}"), false);
        let (_, _, result) = grouped(&tagged, &["SUNION", "{t}a", "{t}b"]);
        assert_eq!(result.unwrap().servers.len(), 1);
    }

    #[test]
    fn eval_with_keys_on_two_servers_is_refused() {
        let p = pool(3, None, false);
        let (a, b) = two_keys_on_two_servers(&p);
        let (_, _, result) = grouped(&p, &["EVAL", "return 1", "2", &a, &b]);
        assert_eq!(result, Err(CommandError::CrossServer("EVAL".into())));
    }
}
