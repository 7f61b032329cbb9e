//! Where a Redis command's keys go in a `shard` pool, the per-server commands a
//! multi-key command is cut into, and how their replies merge back.
//!
//! Placement is twemproxy's, the same as for memcached pools: the key (or the part of it
//! between the pool's `hash_tag` characters) hashed with the pool's hash, on the pool's
//! distribution; with `auto_eject_hosts` a key whose server is ejected goes to the next
//! live server on the ring.

use bytes::BufMut;
use cachelab_protocol::resp::{put_array_header, put_bulk, Command};
use cachelab_protocol::{parse_resp_reply, RespReply};
use thiserror::Error;

use super::commands::{CommandError, KeyArgs, Spec, Split};
use crate::routing::plan::{Alive, Pool, RespMerge, ServerId};

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

/// Why the parts' replies cannot be merged into one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum MergeError {
    /// A part answered with the wrong type or the wrong number of values: the server's
    /// reply stream is not what the command asked for.
    #[error("part {part} answered with an unexpected reply")]
    Unexpected { part: usize },
    #[error("summed counts overflow")]
    Overflow,
}

/// Merges the replies of a split command's parts (`replies[g]` answers group `g`;
/// `key_groups[i]` is the group of the client's i-th key) into the client's reply. An error reply from a part is the client's reply (the first in
/// part order, so the outcome does not depend on timing).
pub fn merge_parts(
    split: Split,
    replies: &[RespReply<'_>],
    key_groups: &[u32],
    out: &mut impl BufMut,
) -> Result<(), MergeError> {
    if let Some(RespReply::Error(text)) = replies.iter().find(|r| matches!(r, RespReply::Error(_)))
    {
        out.put_u8(b'-');
        out.put_slice(text);
        out.put_slice(b"\r\n");
        return Ok(());
    }
    match split {
        Split::Values => merge_values(replies, key_groups, out),
        Split::Sum => {
            let mut total: i64 = 0;
            for (part, reply) in replies.iter().enumerate() {
                let RespReply::Integer(n) = reply else {
                    return Err(MergeError::Unexpected { part });
                };
                total = total.checked_add(*n).ok_or(MergeError::Overflow)?;
            }
            out.put_slice(format!(":{total}\r\n").as_bytes());
            Ok(())
        }
        Split::AllOk | Split::Never => {
            if let Some(part) = replies.iter().position(|r| *r != RespReply::Simple(b"OK")) {
                return Err(MergeError::Unexpected { part });
            }
            out.put_slice(b"+OK\r\n");
            Ok(())
        }
    }
}

/// [`merge_parts`] from the parts' reply bytes (each one whole RESP reply, as the
/// worker read it) under a plan's merge rule.
pub fn merge_resp_parts(
    rule: RespMerge,
    parts: &[&[u8]],
    key_groups: &[u32],
    out: &mut impl BufMut,
) -> Result<(), MergeError> {
    let mut replies = Vec::with_capacity(parts.len());
    for (part, bytes) in parts.iter().enumerate() {
        match parse_resp_reply(bytes) {
            Ok((reply, _)) => replies.push(reply),
            Err(_) => return Err(MergeError::Unexpected { part }),
        }
    }
    let split = match rule {
        RespMerge::Values => Split::Values,
        RespMerge::Sum => Split::Sum,
        RespMerge::AllOk => Split::AllOk,
    };
    merge_parts(split, &replies, key_groups, out)
}

fn merge_values(
    replies: &[RespReply<'_>],
    key_groups: &[u32],
    out: &mut impl BufMut,
) -> Result<(), MergeError> {
    let mut parts = Vec::with_capacity(replies.len());
    for (part, reply) in replies.iter().enumerate() {
        let wanted = key_groups.iter().filter(|g| **g as usize == part).count();
        match reply {
            RespReply::Array(Some(elements)) if elements.len() == wanted => {
                parts.push(elements.iter())
            }
            _ => return Err(MergeError::Unexpected { part }),
        }
    }
    put_array_header(out, key_groups.len());
    for &group in key_groups {
        match parts[group as usize].next() {
            Some(RespReply::Bulk(Some(value))) => put_bulk(out, value),
            Some(RespReply::Bulk(None)) => out.put_slice(b"$-1\r\n"),
            _ => {
                return Err(MergeError::Unexpected {
                    part: group as usize,
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::hash::Hash;
    use crate::routing::plan::{Mode, PoolServer, ReadPolicy};
    use crate::routing::redis::commands::{classify, key_args, Kind};
    use crate::routing::ring::{Distribution, Member};
    use crate::routing::test_support::{none, Ejected};
    use cachelab_protocol::parse_resp_reply;
    use std::borrow::Cow;
    use std::time::Duration;

    fn pool(n: usize, tag: Option<[u8; 2]>, auto_eject: bool) -> Pool {
        let servers = (0..n)
            .map(|i| PoolServer {
                id: 10 + i,
                addr: format!("127.0.0.1:{}", 7000 + i)
                    .parse::<std::net::SocketAddr>()
                    .unwrap()
                    .into(),
                member: Member {
                    name: format!("127.0.0.1:{}", 7000 + i),
                    weight: 1,
                },
            })
            .collect();
        Pool::new(
            "r".into(),
            servers,
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

    fn replies(raw: &[&'static [u8]]) -> Vec<RespReply<'static>> {
        raw.iter().map(|r| parse_resp_reply(r).unwrap().0).collect()
    }

    fn merged(
        split: Split,
        raw: &[&'static [u8]],
        key_groups: &[u32],
    ) -> Result<Vec<u8>, MergeError> {
        let mut out = Vec::new();
        merge_parts(split, &replies(raw), key_groups, &mut out).map(|_| out)
    }

    #[test]
    fn mget_values_come_back_in_the_client_s_key_order() {
        let out = merged(
            Split::Values,
            &[b"*2\r\n$1\r\na\r\n$-1\r\n", b"*1\r\n$1\r\nb\r\n"],
            &[0, 1, 0],
        );
        assert_eq!(out.unwrap(), b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$-1\r\n");
    }

    #[test]
    fn del_unlink_exists_touch_counts_are_summed() {
        let out = merged(
            Split::Sum,
            &[b":2\r\n", b":0\r\n", b":1\r\n"],
            &[0, 0, 1, 2],
        );
        assert_eq!(out.unwrap(), b":3\r\n");
    }

    #[test]
    fn mset_is_ok_when_every_part_is_ok() {
        assert_eq!(
            merged(Split::AllOk, &[b"+OK\r\n", b"+OK\r\n"], &[0, 1]).unwrap(),
            b"+OK\r\n"
        );
    }

    #[test]
    fn an_error_from_any_part_is_the_client_s_reply() {
        let out = merged(
            Split::Values,
            &[
                b"*1\r\n$1\r\na\r\n",
                b"-WRONGTYPE Operation\r\n",
                b"-ERR later\r\n",
            ],
            &[0, 1, 2],
        );
        assert_eq!(out.unwrap(), b"-WRONGTYPE Operation\r\n");
        let out = merged(Split::AllOk, &[b"+OK\r\n", b"-OOM full\r\n"], &[0, 1]);
        assert_eq!(out.unwrap(), b"-OOM full\r\n");
    }

    #[test]
    fn a_part_reply_of_the_wrong_shape_is_not_merged() {
        assert_eq!(
            merged(Split::Values, &[b"*1\r\n$1\r\na\r\n"], &[0, 0]),
            Err(MergeError::Unexpected { part: 0 })
        );
        assert_eq!(
            merged(Split::Sum, &[b":1\r\n", b"+OK\r\n"], &[0, 1]),
            Err(MergeError::Unexpected { part: 1 })
        );
        assert_eq!(
            merged(Split::AllOk, &[b"+OK\r\n", b":1\r\n"], &[0, 1]),
            Err(MergeError::Unexpected { part: 1 })
        );
        assert_eq!(
            merged(Split::Values, &[b"*1\r\n*0\r\n"], &[0]),
            Err(MergeError::Unexpected { part: 0 })
        );
    }

    #[test]
    fn parts_read_as_bytes_merge_by_the_plan_s_rule() {
        let mut out = Vec::new();
        merge_resp_parts(
            RespMerge::Values,
            &[b"*1\r\n$1\r\nb\r\n", b"*1\r\n$-1\r\n"],
            &[1, 0],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, b"*2\r\n$-1\r\n$1\r\nb\r\n");
        assert_eq!(
            merge_resp_parts(RespMerge::Sum, &[b":1\r\n", b":x"], &[0, 1], &mut out),
            Err(MergeError::Unexpected { part: 1 })
        );
    }

    #[test]
    fn summed_counts_that_overflow_are_refused() {
        assert_eq!(
            merged(
                Split::Sum,
                &[b":9223372036854775807\r\n", b":1\r\n"],
                &[0, 1]
            ),
            Err(MergeError::Overflow)
        );
    }
}
