//! A request's plan: which server gets which part, who may stand in, and how the
//! replies merge, for every pool mode and access (the rules are in [`super`]'s
//! documentation and in `routing`'s).

use cachelab_protocol::request::meta_flags;

use super::{Access, Alive, Merge, Mode, Part, PartKeys, Plan, Pool, ReadPolicy, ServerId};
use crate::routing::spans::KeySpans;
use crate::routing::split_sizes;

impl Pool {
    /// Builds the plan for one request into `plan` (cleared first). `frame` is the
    /// request as the servers get it; `spans` where its keys are (for a multi-key
    /// request; empty for one key); `rr` what [`Pool::assign`] gave it at decode time.
    pub fn plan(
        &self,
        access: Access,
        frame: &[u8],
        spans: &KeySpans,
        rr: u64,
        alive: &impl Alive,
        plan: &mut Plan,
    ) {
        plan.clear();
        // Multi-key requests carry their keys' spans; every other request has one key.
        let keys = spans.len();
        let n = self.n();
        let ids = |start: usize| (0..n).map(move |k| self.servers[(start + k) % n].id);
        let replicated = self.replicas() > 1;
        match (self.mode, access) {
            (_, Access::ReadCas) if replicated && keys <= 1 => {
                plan.merge = Some(Merge::Relay);
                let key = single_key(frame);
                let holders: Vec<ServerId> = self.key_replicas(&key).collect();
                plan.push_part(PartKeys::Whole, holders);
            }
            (_, Access::ReadCas) if replicated => {
                self.plan_by_key(frame, spans, rr, ReadPolicy::Primary, alive, plan)
            }
            (_, Access::WriteCas) if replicated => {
                plan.merge = Some(Merge::Primary);
                let key = single_key(frame);
                let holders: Vec<ServerId> = self.key_replicas(&key).collect();
                let primary = holders
                    .iter()
                    .copied()
                    .find(|&s| !alive.is_ejected(s))
                    .unwrap_or(holders[0]);
                plan.push_part(PartKeys::Whole, [primary]);
                // Replicas out of service are not written (as the primary moved on).
                plan.follow_ups.extend(
                    holders
                        .into_iter()
                        .filter(|&s| s != primary && !alive.is_ejected(s)),
                );
            }
            (_, Access::Broadcast) | (Mode::Replicate { .. }, Access::Write | Access::WriteCas) => {
                plan.merge = Some(Merge::AllMustSucceed);
                for server in &self.servers {
                    plan.push_part(PartKeys::Whole, [server.id]);
                }
            }
            (Mode::Replicate { split_multiget }, Access::Read | Access::ReadCas) => {
                let first = (rr % n as u64) as usize;
                if split_multiget && keys > 1 && n > 1 {
                    plan.merge = Some(Merge::Concat);
                    let mut start = 0;
                    for (part, len) in split_sizes(keys, n).enumerate() {
                        plan.push_part(PartKeys::Consecutive { start, len }, ids(first + part));
                        start += len;
                    }
                } else {
                    plan.merge = Some(Merge::Relay);
                    plan.push_part(PartKeys::Whole, ids(first));
                }
            }
            (Mode::Shard { .. }, Access::Write | Access::WriteCas) => {
                let key = single_key(frame);
                let holders = self.key_servers(&key);
                if self.replicas() > 1 {
                    plan.merge = Some(Merge::AllMustSucceed);
                    for m in holders.take(self.replicas()) {
                        plan.push_part(PartKeys::Whole, [self.servers[m].id]);
                    }
                } else {
                    // twemproxy: the key's server, or with auto_eject_hosts the next live
                    // one; a write is not re-sent elsewhere once it has gone out.
                    plan.merge = Some(Merge::Relay);
                    let mut holders = holders.map(|m| self.servers[m].id).peekable();
                    let home = *holders.peek().expect("a pool has servers");
                    let target = if self.auto_eject {
                        holders.find(|&s| !alive.is_ejected(s)).unwrap_or(home)
                    } else {
                        home
                    };
                    plan.push_part(PartKeys::Whole, [target]);
                }
            }
            (Mode::Shard { .. }, Access::Read | Access::ReadCas) if keys <= 1 => {
                plan.merge = Some(Merge::Relay);
                let mut candidates = std::mem::take(&mut plan.candidates);
                self.read_candidates(&single_key(frame), rr, &mut candidates);
                plan.candidates = candidates;
                plan.parts.push(Part {
                    keys: PartKeys::Whole,
                    candidates: 0..plan.candidates.len(),
                });
            }
            (Mode::Shard { .. }, Access::Read | Access::ReadCas) => {
                self.plan_by_key(frame, spans, rr, self.read_policy, alive, plan)
            }
        }
    }

    /// A multi-GET in a shard pool: each key to the first live server that may serve
    /// it, one part per server, the reply put back in the client's key order.
    fn plan_by_key(
        &self,
        frame: &[u8],
        spans: &KeySpans,
        rr: u64,
        policy: ReadPolicy,
        alive: &impl Alive,
        plan: &mut Plan,
    ) {
        plan.merge = Some(Merge::ByKey);
        let mut scratch = Vec::with_capacity(self.n());
        // (server, part) pairs: few servers, so a linear search beats a map.
        let mut part_of: Vec<(ServerId, u32)> = Vec::with_capacity(self.n());
        let mut servers: Vec<ServerId> = Vec::with_capacity(self.n());
        for key in spans.keys(frame) {
            scratch.clear();
            self.candidates_by(key, rr, policy, &mut scratch);
            let server = scratch
                .iter()
                .copied()
                .find(|&s| !alive.is_ejected(s))
                .unwrap_or(scratch[0]);
            let part = match part_of.iter().find(|(s, _)| *s == server) {
                Some(&(_, part)) => part,
                None => {
                    let part = part_of.len() as u32;
                    part_of.push((server, part));
                    servers.push(server);
                    part
                }
            };
            plan.key_parts.push(part);
        }
        for server in servers {
            plan.push_part(PartKeys::Listed, [server]);
        }
    }
}

/// The routing key of a single-key request frame (text or meta protocol): the second
/// token, base64-decoded for a meta command with the `b` flag (so `mg aGVsbG8= b` goes
/// where `get hello` goes).
fn single_key(frame: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let line_end = memchr::memchr(b'\r', frame).unwrap_or(frame.len());
    let mut tokens = frame[..line_end]
        .split(|b| *b == b' ')
        .filter(|t| !t.is_empty());
    let command = tokens.next().unwrap_or(b"");
    let key = tokens.next().unwrap_or(b"");
    // As memcached reads it: a flag by its first byte; `me` only an exact `b` after the key.
    let base64 = match command {
        b"me" => tokens.next() == Some(b"b"),
        [b'm', _] => tokens.any(|t| t[0] == b'b'),
        _ => false,
    };
    if base64 {
        if let Some(decoded) = meta_flags::decode_base64_key(key) {
            return std::borrow::Cow::Owned(decoded);
        }
    }
    std::borrow::Cow::Borrowed(key)
}

#[cfg(test)]
mod tests {
    use super::super::tagged;
    use super::*;
    use crate::routing::hash::Hash;
    use crate::routing::ring::Distribution;
    use crate::routing::test_support::{none, servers, Ejected};
    use cachelab_protocol::{parse_request, Limits, Request};
    use std::collections::HashSet;
    use std::time::Duration;

    fn shard(n: usize, replicas: usize, auto_eject: bool) -> Pool {
        Pool::new(
            "p".into(),
            servers(n, 21000),
            Mode::Shard { replicas },
            Hash::Fnv1a64,
            None,
            Distribution::Ketama,
            auto_eject,
            ReadPolicy::RoundRobin,
            Duration::from_secs(1),
        )
    }

    fn planned(pool: &Pool, access: Access, frame: &[u8], keys: usize, alive: &Ejected) -> Plan {
        let rr = pool.assign(access, keys);
        let mut plan = Plan::default();
        let spans = match parse_request(frame, &Limits::default()) {
            Ok((Request::Get(get), _)) if keys > 1 => KeySpans::of(frame, get.keys.iter()),
            _ => KeySpans::default(),
        };
        pool.plan(access, frame, &spans, rr, alive, &mut plan);
        plan
    }

    #[test]
    fn gets_and_cas_of_a_key_go_to_its_primary_whatever_the_rotation() {
        let pool = Pool::replicate(servers(3, 21000), false, Duration::from_secs(1));
        let primary = pool.key_replicas(b"k").next().unwrap();
        for _ in 0..4 {
            let gets = planned(&pool, Access::ReadCas, b"gets k\r\n", 1, &none());
            assert_eq!(gets.merge(), Merge::Relay);
            assert_eq!(gets.candidates_of(0)[0], primary);
            let cas = planned(
                &pool,
                Access::WriteCas,
                b"cas k 0 0 1 7\r\nx\r\n",
                1,
                &none(),
            );
            assert_eq!(cas.merge(), Merge::Primary);
            assert_eq!(cas.candidates_of(0), &[primary]);
            let mut others = cas.follow_ups.clone();
            others.sort();
            let mut expected: Vec<ServerId> = vec![10, 11, 12];
            expected.retain(|&s| s != primary);
            assert_eq!(others, expected, "the other replicas converge");
        }
    }

    #[test]
    fn an_ejected_primary_hands_its_keys_to_the_next_server_in_their_order() {
        let pool = Pool::replicate(servers(3, 21000), false, Duration::from_secs(1));
        let order: Vec<ServerId> = pool.key_replicas(b"k").collect();
        let ejected = Ejected([order[0]].into_iter().collect());
        let cas = planned(
            &pool,
            Access::WriteCas,
            b"cas k 0 0 1 7\r\nx\r\n",
            1,
            &ejected,
        );
        assert_eq!(cas.candidates_of(0), &[order[1]]);
        assert_eq!(cas.follow_ups, vec![order[2]]);
        let gets = planned(&pool, Access::ReadCas, b"gets k\r\n", 1, &ejected);
        assert_eq!(
            gets.candidates_of(0),
            &order[..],
            "stage skips the ejected first"
        );
    }

    #[test]
    fn a_multi_key_gets_asks_each_key_at_its_primary() {
        let pool = Pool::replicate(servers(3, 21000), false, Duration::from_secs(1));
        let keys = [&b"a"[..], b"b", b"c", b"d", b"e"];
        let plan = planned(&pool, Access::ReadCas, b"gets a b c d e\r\n", 5, &none());
        assert_eq!(plan.merge(), Merge::ByKey);
        for (key, part) in keys.iter().zip(&plan.key_parts) {
            let primary = pool.key_replicas(key).next().unwrap();
            assert_eq!(plan.candidates_of(*part as usize)[0], primary);
        }
    }

    #[test]
    fn cas_in_a_shard_pool_with_replicas_goes_to_the_first_replica() {
        let pool = shard(4, 2, true);
        let holders: Vec<ServerId> = pool.key_replicas(b"k").collect();
        assert_eq!(holders.len(), 2);
        let cas = planned(&pool, Access::WriteCas, b"ms k 1 C5\r\nx\r\n", 1, &none());
        assert_eq!(cas.candidates_of(0), &[holders[0]]);
        assert_eq!(cas.follow_ups, vec![holders[1]]);
        // Without replicas a cas is any other write: to the key's one server.
        let single = shard(4, 1, true);
        let plain = planned(
            &single,
            Access::WriteCas,
            b"cas k 0 0 1 7\r\nx\r\n",
            1,
            &none(),
        );
        assert_eq!(plain.merge(), Merge::Relay);
    }

    #[test]
    fn replicate_reads_rotate_and_fail_over_to_every_other_server() {
        let pool = Pool::replicate(servers(3, 21000), false, Duration::from_secs(1));
        let firsts: Vec<ServerId> = (0..4)
            .map(|_| planned(&pool, Access::Read, b"get k\r\n", 1, &none()).candidates_of(0)[0])
            .collect();
        assert_eq!(firsts, vec![10, 11, 12, 10]);
        let plan = planned(&pool, Access::Read, b"get k\r\n", 1, &none());
        assert_eq!(plan.merge(), Merge::Relay);
        assert_eq!(plan.candidates_of(0), &[11, 12, 10]);
    }

    #[test]
    fn replicate_writes_go_to_every_server_with_the_reply_rule() {
        let pool = Pool::replicate(servers(3, 21000), false, Duration::from_secs(1));
        let plan = planned(&pool, Access::Write, b"set k 0 0 1\r\nv\r\n", 1, &none());
        assert_eq!(plan.merge(), Merge::AllMustSucceed);
        let targets: Vec<ServerId> = (0..3).map(|p| plan.candidates_of(p)[0]).collect();
        assert_eq!(targets, vec![10, 11, 12]);
        assert!(
            (0..3).all(|p| plan.candidates_of(p).len() == 1),
            "writes never move"
        );
    }

    #[test]
    fn a_split_multi_get_takes_consecutive_parts_three_two_two() {
        let pool = Pool::replicate(servers(3, 21000), true, Duration::from_secs(1));
        let plan = planned(&pool, Access::Read, b"get a b c d e f g\r\n", 7, &none());
        assert_eq!(plan.merge(), Merge::Concat);
        let parts: Vec<PartKeys> = plan.parts.iter().map(|p| p.keys).collect();
        assert_eq!(
            parts,
            vec![
                PartKeys::Consecutive { start: 0, len: 3 },
                PartKeys::Consecutive { start: 3, len: 2 },
                PartKeys::Consecutive { start: 5, len: 2 },
            ]
        );
        assert_eq!(plan.candidates_of(1), &[11, 12, 10]);
        // The next read continues the rotation after the three parts.
        let next = planned(&pool, Access::Read, b"get k\r\n", 1, &none());
        assert_eq!(next.candidates_of(0)[0], 10);
    }

    #[test]
    fn a_sharded_key_goes_to_its_ring_server_for_reads_and_writes() {
        let pool = shard(3, 1, false);
        let home = pool.servers[pool.ring.home(pool.key_hash(b"user:1"))].id;
        let read = planned(&pool, Access::Read, b"get user:1\r\n", 1, &none());
        assert_eq!(read.candidates_of(0), &[home]);
        let write = planned(
            &pool,
            Access::Write,
            b"set user:1 0 0 1\r\nx\r\n",
            1,
            &none(),
        );
        assert_eq!(
            (write.merge(), write.candidates_of(0)),
            (Merge::Relay, &[home][..])
        );
    }

    #[test]
    fn with_auto_eject_a_key_of_an_ejected_server_moves_to_the_next_on_the_ring() {
        let pool = shard(3, 1, true);
        let walk: Vec<ServerId> = pool.key_servers(b"k").map(|m| pool.servers[m].id).collect();
        let ejected = Ejected([walk[0]].into_iter().collect());
        let write = planned(&pool, Access::Write, b"delete k\r\n", 1, &ejected);
        assert_eq!(write.candidates_of(0), &[walk[1]]);
        let read = planned(&pool, Access::Read, b"get k\r\n", 1, &ejected);
        assert_eq!(
            read.candidates_of(0),
            &walk[..],
            "reads fail over along the ring"
        );
    }

    #[test]
    fn replicas_take_writes_together_and_reads_in_turn() {
        let pool = shard(3, 2, false);
        let holders: Vec<ServerId> = pool
            .key_servers(b"k")
            .take(2)
            .map(|m| pool.servers[m].id)
            .collect();
        let write = planned(&pool, Access::Write, b"set k 0 0 1\r\nv\r\n", 1, &none());
        assert_eq!(write.merge(), Merge::AllMustSucceed);
        assert_eq!(
            (0..2)
                .map(|p| write.candidates_of(p)[0])
                .collect::<Vec<_>>(),
            holders
        );
        let a = planned(&pool, Access::Read, b"get k\r\n", 1, &none());
        let b = planned(&pool, Access::Read, b"get k\r\n", 1, &none());
        assert_eq!(a.candidates_of(0), &[holders[0], holders[1]]);
        assert_eq!(b.candidates_of(0), &[holders[1], holders[0]]);
    }

    #[test]
    fn a_sharded_multi_get_is_grouped_by_server_and_remembers_the_key_order() {
        let pool = shard(3, 1, false);
        let keys: Vec<String> = (0..20).map(|i| format!("key{i}")).collect();
        let frame = format!("get {}\r\n", keys.join(" "));
        let plan = planned(&pool, Access::Read, frame.as_bytes(), 20, &none());
        assert_eq!(plan.merge(), Merge::ByKey);
        assert_eq!(plan.key_parts.len(), 20);
        for (key, &part) in keys.iter().zip(&plan.key_parts) {
            let home = pool.servers[pool.ring.home(pool.key_hash(key.as_bytes()))].id;
            assert_eq!(plan.candidates_of(part as usize), &[home], "{key}");
        }
        let distinct: HashSet<ServerId> = (0..plan.parts.len())
            .map(|p| plan.candidates_of(p)[0])
            .collect();
        assert_eq!(distinct.len(), plan.parts.len(), "one part per server");
    }

    #[test]
    fn flush_all_goes_to_every_server_of_a_shard_pool() {
        let pool = shard(3, 1, false);
        let plan = planned(&pool, Access::Broadcast, b"flush_all\r\n", 0, &none());
        assert_eq!(plan.parts.len(), 3);
        assert_eq!(plan.merge(), Merge::AllMustSucceed);
    }

    #[test]
    fn a_base64_meta_key_routes_like_its_decoded_text_key() {
        let pool = shard(5, 1, false);
        let text = planned(&pool, Access::Read, b"get hello\r\n", 1, &none());
        let meta = planned(&pool, Access::Read, b"mg aGVsbG8= b v\r\n", 1, &none());
        assert_eq!(text.candidates_of(0), meta.candidates_of(0));
    }

    #[test]
    fn the_hash_tag_picks_the_part_between_its_characters() {
        let tag = Some([b'{', b'}']);
        assert_eq!(tagged(b"user:{42}:name", tag), b"42");
        assert_eq!(tagged(b"user:{}:name", tag), b"user:{}:name");
        assert_eq!(tagged(b"user:{42", tag), b"user:{42");
        assert_eq!(tagged(b"plain", None), b"plain");
    }
}
