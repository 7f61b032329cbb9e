//! Plans for Redis pools: a routed command (its table entry and where its keys are) and
//! its pool in, the same [`Plan`] the worker carries out for memcached out.
//!
//! - `replicate` (the study's structure): a write goes to every server and every one
//!   must succeed ([`Merge::AllMustSucceed`]); a read goes to one server, round-robin from
//!   its decode-time position, the others standing in when it fails. With `-s`, an
//!   `MGET` of k keys is cut into `min(k, n)` runs of consecutive keys as a memcached
//!   multi-GET is ([`split_sizes`]), its values merged back in key order.
//! - `shard` (twemproxy's model): each key on its server ([`key_server`]); a command
//!   whose keys are on one server is relayed whole; `MGET`, `DEL`/`UNLINK`/`EXISTS`/
//!   `TOUCH` and `MSET` over several servers are cut into one command per server and
//!   merged ([`Merge::Resp`]). A command that cannot be split was refused at decode time
//!   if its keys are on several servers; should an ejection move them apart after that,
//!   it goes where its first key is, as twemproxy routes every multi-key command.
//!
//! The frame a plan reads is an array of bulk strings, and `args` are the spans of all
//! its arguments (the name included), found once by the decoder.

use bytes::BytesMut;
use cachelab_protocol::resp::{put_array_header, put_bulk};

use super::commands::{Access as RedisAccess, KeyArgs, Spec, Split};
use super::split::key_server;
use crate::routing::plan::{
    Access, Alive, Merge, Mode, PartKeys, Plan, Pool, ReadPolicy, RespMerge, ServerId,
};
use crate::routing::spans::KeySpans;
use crate::routing::split_sizes;

/// A routed command: its table entry and its keys' argument positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub spec: &'static Spec,
    pub keys: KeyArgs,
}

impl Route {
    /// Reads go to one server of a `replicate` pool, writes to all.
    pub fn access(self) -> Access {
        match self.spec.access {
            RedisAccess::Read => Access::Read,
            RedisAccess::Write => Access::Write,
        }
    }

    /// How many round-robin positions a read takes ([`Pool::assign`]'s key count): an
    /// `MGET` may be split over the servers, any other read goes to one.
    pub fn assigned_keys(self) -> usize {
        if self.spec.split == Split::Values {
            self.keys.count()
        } else {
            1
        }
    }

    fn merge(self) -> Option<RespMerge> {
        match self.spec.split {
            Split::Values => Some(RespMerge::Values),
            Split::Sum => Some(RespMerge::Sum),
            Split::AllOk => Some(RespMerge::AllOk),
            Split::Never => None,
        }
    }
}

/// Builds the plan for `route` into `plan` (cleared first); `rr` is what
/// [`Pool::assign`] gave the command at decode time.
pub fn plan(
    pool: &Pool,
    route: Route,
    frame: &[u8],
    args: &KeySpans,
    rr: u64,
    alive: &impl Alive,
    plan: &mut Plan,
) {
    plan.clear();
    let n = pool.n();
    let ids = |start: usize| (0..n).map(move |k| pool.servers[(start + k) % n].id);
    match (pool.mode, route.access()) {
        (Mode::Replicate { .. }, Access::Write) => {
            plan.merge = Some(Merge::AllMustSucceed);
            for server in &pool.servers {
                plan.push_part(PartKeys::Whole, [server.id]);
            }
        }
        (Mode::Replicate { split_multiget }, _) => {
            let first = (rr % n as u64) as usize;
            let keys = route.keys.count();
            match route.merge() {
                Some(merge @ RespMerge::Values) if split_multiget && keys > 1 && n > 1 => {
                    plan.merge = Some(Merge::Resp(merge));
                    for (part, len) in split_sizes(keys, n).enumerate() {
                        plan.key_parts.extend(std::iter::repeat_n(part as u32, len));
                        plan.push_part(PartKeys::Listed, ids(first + part));
                    }
                }
                _ => {
                    plan.merge = Some(Merge::Relay);
                    plan.push_part(PartKeys::Whole, ids(first));
                }
            }
        }
        (Mode::Shard { .. }, access) => {
            let mut servers: Vec<ServerId> = Vec::with_capacity(2);
            for arg in route.keys.iter() {
                let key = args.get(frame, arg).unwrap_or_default();
                let server = key_server(pool, key, alive);
                let part = match servers.iter().position(|&s| s == server) {
                    Some(part) => part,
                    None => {
                        servers.push(server);
                        servers.len() - 1
                    }
                };
                plan.key_parts.push(part as u32);
            }
            match route.merge() {
                Some(merge) if servers.len() > 1 => {
                    plan.merge = Some(Merge::Resp(merge));
                    for server in servers {
                        plan.push_part(PartKeys::Listed, [server]);
                    }
                }
                _ => {
                    plan.key_parts.clear();
                    plan.merge = Some(Merge::Relay);
                    let first = route
                        .keys
                        .iter()
                        .next()
                        .expect("a routed command has a key");
                    let key = args.get(frame, first).unwrap_or_default();
                    if access == Access::Read && pool.auto_eject {
                        // The key's server, then the next live ones on the ring stand in.
                        let mut candidates = Vec::with_capacity(n);
                        pool.candidates_by(key, rr, ReadPolicy::Primary, &mut candidates);
                        let home = servers[0];
                        candidates.retain(|&s| s != home);
                        candidates.insert(0, home);
                        plan.push_part(PartKeys::Whole, candidates);
                    } else {
                        plan.push_part(PartKeys::Whole, [servers[0]]);
                    }
                }
            }
        }
    }
}

/// Writes part `part` of a split command into `out`: its name, then the keys whose
/// entry in `key_parts` is `part` (each with its value, for `MSET`'s pairs), in the
/// client's order.
pub fn compose_part(
    frame: &[u8],
    args: &KeySpans,
    route: Route,
    key_parts: &[u32],
    part: usize,
    out: &mut BytesMut,
) {
    let per_key = if route.spec.split == Split::AllOk {
        2
    } else {
        1
    };
    let count = key_parts.iter().filter(|&&p| p as usize == part).count();
    put_array_header(out, 1 + count * per_key);
    put_bulk(out, args.get(frame, 0).unwrap_or_default());
    for (arg, _) in route
        .keys
        .iter()
        .zip(key_parts)
        .filter(|(_, &p)| p as usize == part)
    {
        for i in arg..arg + per_key {
            put_bulk(out, args.get(frame, i).unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::hash::Hash;
    use crate::routing::redis::commands::{classify, key_args, Kind};
    use crate::routing::ring::Distribution;
    use crate::routing::test_support::{none, servers, Ejected};
    use cachelab_protocol::resp::{compose_command, parse_command, RespLimits};
    use std::time::Duration;

    fn shard(n: usize, auto_eject: bool) -> Pool {
        Pool::new(
            "r".into(),
            servers(n, 7000),
            Mode::Shard { replicas: 1 },
            Hash::Fnv1a64,
            Some(*b"{}"),
            Distribution::Ketama,
            auto_eject,
            ReadPolicy::Primary,
            Duration::from_secs(1),
        )
    }

    /// A command as the decoder hands it on: its frame, its route and its spans.
    struct Decoded {
        frame: Vec<u8>,
        route: Route,
        args: KeySpans,
    }

    fn decoded(args: &[&str]) -> Decoded {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut frame = Vec::new();
        compose_command(&mut frame, &bytes);
        let (command, _) = parse_command(&frame, &RespLimits::default()).unwrap();
        let Ok(Kind::Routed(spec)) = classify(&command) else {
            panic!("{args:?}")
        };
        let keys = key_args(spec, &command).unwrap();
        let spans = KeySpans::of(&frame, command.args().iter().map(|a| &a[..]));
        Decoded {
            route: Route { spec, keys },
            args: spans,
            frame,
        }
    }

    fn planned(pool: &Pool, args: &[&str], alive: &Ejected) -> (Plan, Decoded) {
        let d = decoded(args);
        let rr = pool.assign(d.route.access(), d.route.assigned_keys());
        let mut p = Plan::default();
        plan(pool, d.route, &d.frame, &d.args, rr, alive, &mut p);
        (p, d)
    }

    fn part_text(p: &Plan, d: &Decoded, part: usize) -> String {
        let mut out = BytesMut::new();
        compose_part(&d.frame, &d.args, d.route, &p.key_parts, part, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    /// Two keys on different servers of `pool`.
    fn apart(pool: &Pool) -> (String, String) {
        let home = key_server(pool, b"k0", &none());
        let other = (1..)
            .map(|i| format!("k{i}"))
            .find(|k| key_server(pool, k.as_bytes(), &none()) != home)
            .unwrap();
        ("k0".into(), other)
    }

    #[test]
    fn replicate_writes_go_to_every_server_and_all_must_succeed() {
        let pool = Pool::replicate(servers(3, 7000), false, Duration::from_secs(1));
        for args in [
            &["SET", "k", "v"][..],
            &["DEL", "a", "b"],
            &["MSET", "a", "1"],
        ] {
            let (p, _) = planned(&pool, args, &none());
            assert_eq!(p.merge(), Merge::AllMustSucceed, "{args:?}");
            assert_eq!(p.candidates, vec![10, 11, 12]);
        }
    }

    #[test]
    fn replicate_reads_rotate_over_the_servers_with_the_others_standing_in() {
        let pool = Pool::replicate(servers(3, 7000), false, Duration::from_secs(1));
        let firsts: Vec<ServerId> = (0..4)
            .map(|_| {
                let (p, _) = planned(&pool, &["GET", "k"], &none());
                assert_eq!(p.merge(), Merge::Relay);
                assert_eq!(p.candidates_of(0).len(), 3);
                p.candidates_of(0)[0]
            })
            .collect();
        assert_eq!(firsts, vec![10, 11, 12, 10]);
    }

    #[test]
    fn a_sharded_mget_in_a_replicate_pool_is_cut_into_runs_of_keys() {
        let pool = Pool::replicate(servers(3, 7000), true, Duration::from_secs(1));
        let (p, d) = planned(&pool, &["MGET", "a", "b", "c", "d"], &none());
        assert_eq!(p.merge(), Merge::Resp(RespMerge::Values));
        assert_eq!(p.key_parts, vec![0, 0, 1, 2]);
        assert_eq!(
            part_text(&p, &d, 0),
            "*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n"
        );
        assert_eq!(part_text(&p, &d, 2), "*2\r\n$4\r\nMGET\r\n$1\r\nd\r\n");
        let firsts: Vec<ServerId> = (0..3).map(|i| p.candidates_of(i)[0]).collect();
        assert_eq!(firsts, vec![10, 11, 12]);
        // not split: one key, or a read that is not an MGET
        let (one, _) = planned(&pool, &["MGET", "a"], &none());
        assert_eq!(one.merge(), Merge::Relay);
        let (exists, _) = planned(&pool, &["EXISTS", "a", "b"], &none());
        assert_eq!(exists.merge(), Merge::Relay);
    }

    #[test]
    fn a_shard_command_with_its_keys_on_one_server_is_relayed_whole() {
        let pool = shard(3, false);
        let (p, _) = planned(&pool, &["MGET", "{u}a", "{u}b"], &none());
        assert_eq!(p.merge(), Merge::Relay);
        assert_eq!(p.parts[0].keys, PartKeys::Whole);
        assert_eq!(p.candidates, vec![key_server(&pool, b"u", &none())]);
        assert!(p.key_parts.is_empty());
    }

    #[test]
    fn shard_multi_key_commands_split_by_server_with_their_merge_rule() {
        let pool = shard(3, false);
        let (a, b) = apart(&pool);
        let (p, d) = planned(&pool, &["MGET", &a, &b, &a], &none());
        assert_eq!(p.merge(), Merge::Resp(RespMerge::Values));
        assert_eq!(p.key_parts, vec![0, 1, 0]);
        assert_eq!(
            p.candidates,
            vec![
                key_server(&pool, a.as_bytes(), &none()),
                key_server(&pool, b.as_bytes(), &none())
            ]
        );
        assert_eq!(
            part_text(&p, &d, 0),
            format!("*3\r\n$4\r\nMGET\r\n$2\r\n{a}\r\n$2\r\n{a}\r\n")
        );
        let (del, _) = planned(&pool, &["DEL", &a, &b], &none());
        assert_eq!(del.merge(), Merge::Resp(RespMerge::Sum));
        let (mset, d) = planned(&pool, &["MSET", &a, "1", &b, "2"], &none());
        assert_eq!(mset.merge(), Merge::Resp(RespMerge::AllOk));
        assert_eq!(
            part_text(&mset, &d, 1),
            format!("*3\r\n$4\r\nMSET\r\n${}\r\n{b}\r\n$1\r\n2\r\n", b.len())
        );
    }

    #[test]
    fn a_shard_read_fails_over_along_the_ring_only_with_auto_eject() {
        let strict = shard(3, false);
        let (p, _) = planned(&strict, &["GET", "k"], &none());
        assert_eq!(p.candidates_of(0).len(), 1);
        let ejecting = shard(3, true);
        let home = key_server(&ejecting, b"k", &none());
        let (p, _) = planned(&ejecting, &["GET", "k"], &none());
        assert_eq!(p.candidates_of(0)[0], home);
        assert_eq!(p.candidates_of(0).len(), 3);
        // ejected: the key is on the next live server, which is asked first
        let (p, _) = planned(&ejecting, &["GET", "k"], &Ejected([home].into()));
        assert_ne!(p.candidates_of(0)[0], home);
        let (w, _) = planned(&ejecting, &["SET", "k", "v"], &Ejected([home].into()));
        assert_eq!(w.candidates, vec![p.candidates_of(0)[0]]);
    }

    #[test]
    fn a_command_that_cannot_split_goes_where_its_first_key_is() {
        let pool = shard(3, false);
        let (a, b) = apart(&pool);
        let (p, _) = planned(&pool, &["RENAME", &a, &b], &none());
        assert_eq!(p.merge(), Merge::Relay);
        assert_eq!(p.candidates, vec![key_server(&pool, a.as_bytes(), &none())]);
    }
}
