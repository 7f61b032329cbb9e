//! What each connection sends: the operation (set:get ratio), its keys, its value, composed
//! with the protocol crate; and what a reply means (hit, miss, error). Pure.

use std::rc::Rc;

use cachelab_protocol::binary;
use cachelab_protocol::resp::{compose_command, compose_get, compose_mget, compose_set};
use cachelab_protocol::{
    parse_reply, parse_resp_reply, Expect, Get, Keys, Reply, ReplyError, RespReply, Store, StoreOp,
};
use rand::{Rng, RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::config::{Expiry, Protocol, Requests, Workload};
use crate::cycle::{OpCycle, Ratio, Step};
use crate::keys::KeyGen;
use crate::keysize::{push_padded, KeySize};
use crate::sizes::SizeGen;

/// The operation types reported separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Set = 0,
    Get = 1,
    /// A GET of more than one key (memcached `get k1 k2 ...`, Redis MGET).
    MultiGet = 2,
}

impl Op {
    pub const ALL: [Op; 3] = [Op::Set, Op::Get, Op::MultiGet];

    pub fn name(self) -> &'static str {
        match self {
            Op::Set => "set",
            Op::Get => "get",
            Op::MultiGet => "multiget",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// A composed request: its type, how many keys it asked for, and the number of its
/// first key (a lookaside client sets that key after a miss).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub op: Op,
    pub keys: u32,
    pub key: u64,
}

/// What one reply said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    pub hits: u32,
    pub misses: u32,
    /// An error reply (memcached's ERROR/CLIENT_ERROR/SERVER_ERROR, a RESP error, or an
    /// answer that does not fit the request, such as NOT_STORED to a set).
    pub error: bool,
}

/// The value bytes shared by a thread's connections, made once so that sending a value
/// costs a slice, not a fill. Random data is a pool twice the largest value; each value
/// is a slice at a random offset.
#[derive(Debug)]
pub struct Values {
    bytes: Vec<u8>,
    max: usize,
    random: bool,
}

impl Values {
    /// Values of up to `max` bytes.
    pub fn new(max: usize, random: bool, seed: u64) -> Values {
        let bytes = if random {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            // Printable bytes, so values can be read back and logged.
            (0..2 * max + 1)
                .map(|_| rng.random_range(b'!'..=b'~'))
                .collect()
        } else {
            vec![b'x'; max]
        };
        Values { bytes, max, random }
    }

    fn value<R: Rng + ?Sized>(&self, size: usize, rng: &mut R) -> &[u8] {
        let offset = if self.random {
            rng.random_range(0..=self.max)
        } else {
            0
        };
        &self.bytes[offset..offset + size]
    }
}

/// The seed of key sizes: fixed, not `--seed`, so that a key has one size whoever sends
/// it (the harness's load instances run with different seeds, and a populate run or a
/// warm-up phase must write the keys the measured run reads).
pub const KEY_SIZE_SEED: u64 = 0x6b65_7973_697a_6573;

/// One connection's request stream.
pub struct Generator {
    protocol: Protocol,
    ratio: Ratio,
    cycle: OpCycle,
    sizes: SizeGen,
    expiry: Option<Expiry>,
    set_keys: KeyGen,
    get_keys: KeyGen,
    values: Rc<Values>,
    rng: Xoshiro256PlusPlus,
    prefix: Vec<u8>,
    /// Key sizes drawn per key number under `key_seed` (`--key-size-dist`), the same for
    /// every seed ([`KEY_SIZE_SEED`]).
    key_size: Option<KeySize>,
    key_seed: u64,
    /// Share of GET keys asked from keys never set, and the next such key: numbers above
    /// the key range, client `client` taking every `clients`-th, so none is asked twice.
    lone_share: f64,
    next_lone: u64,
    clients: u64,
    /// The current request's keys, space-separated (reused, so composing allocates nothing).
    keys: Vec<u8>,
    /// The current request's value size, if it is a write.
    value_size: Option<usize>,
}

impl Generator {
    /// The generator of client `client` of `clients`. Each client's stream has its own
    /// seed derived from `seed`, so clients draw different keys and a run is repeatable.
    pub fn new(
        workload: &Workload,
        seed: u64,
        client: usize,
        clients: usize,
        values: Rc<Values>,
    ) -> Generator {
        Generator {
            protocol: workload.protocol,
            ratio: workload.ratio,
            cycle: OpCycle::new(workload.ratio, workload.get_keys),
            sizes: SizeGen::new(workload.data_size.clone(), workload.keys),
            expiry: workload.expiry.clone(),
            set_keys: KeyGen::new(workload.set_pattern, workload.keys, client, clients)
                .drawn_by(workload.key_dist.as_ref().map(|k| &k.1)),
            get_keys: KeyGen::new(workload.get_pattern, workload.keys, client, clients)
                .drawn_by(workload.key_dist.as_ref().map(|k| &k.1)),
            values,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (client as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            ),
            prefix: workload.key_prefix.as_bytes().to_vec(),
            keys: Vec::with_capacity(64),
            value_size: None,
            key_size: workload.key_size.clone(),
            key_seed: KEY_SIZE_SEED,
            lone_share: workload.lone_get_share,
            next_lone: workload.keys.max + 1 + client as u64,
            clients: clients as u64,
        }
    }

    /// How many requests this client sends, if the run is bounded by count: with
    /// `allkeys`, the keys of its share for the pattern that writes (or reads, when the
    /// ratio has no sets).
    pub fn budget(&self, requests: Option<Requests>) -> Option<u64> {
        match requests? {
            Requests::PerClient(n) => Some(n),
            Requests::AllKeys if self.ratio.sets > 0 => Some(self.set_keys.allkeys_count()),
            Requests::AllKeys => Some(self.get_keys.allkeys_count()),
        }
    }

    /// The random stream, for the open-loop schedule of this connection.
    pub fn rng(&mut self) -> &mut Xoshiro256PlusPlus {
        &mut self.rng
    }

    /// Composes the next request into `out`.
    pub fn compose(&mut self, out: &mut Vec<u8>) -> Sent {
        match self.cycle.next_step() {
            Step::Set => self.compose_set(out),
            Step::Get { keys } => self.compose_get(out, keys),
        }
    }

    /// The last request's first key, and the random stream (to place the key with).
    pub fn last_key_and_rng(&mut self) -> (&[u8], &mut Xoshiro256PlusPlus) {
        let end = self.keys.iter().position(|b| *b == b' ');
        (&self.keys[..end.unwrap_or(self.keys.len())], &mut self.rng)
    }

    /// The last request's first key's length and, for a write, its value's size.
    pub fn last_sizes(&self) -> (usize, Option<usize>) {
        let key = self.keys.iter().position(|b| *b == b' ');
        (key.unwrap_or(self.keys.len()), self.value_size)
    }

    fn push_key(&mut self, number: u64) {
        if !self.keys.is_empty() {
            self.keys.push(b' ');
        }
        match &self.key_size {
            None => {
                self.keys.extend_from_slice(&self.prefix);
                self.keys
                    .extend_from_slice(itoa::Buffer::new().format(number).as_bytes());
            }
            Some(sizes) => {
                let shortest = self.prefix.len() + itoa::Buffer::new().format(number).len();
                let size = sizes.size_of(number, self.key_seed, shortest);
                push_padded(&mut self.keys, &self.prefix, number, size);
            }
        }
    }

    /// The next GET key: one never set with probability `lone_share`, else the pattern's.
    fn next_get_key(&mut self) -> u64 {
        if self.lone_share > 0.0 && self.rng.random::<f64>() < self.lone_share {
            let key = self.next_lone;
            self.next_lone = self.next_lone.wrapping_add(self.clients);
            return key;
        }
        self.get_keys.next(&mut self.rng)
    }

    fn compose_set(&mut self, out: &mut Vec<u8>) -> Sent {
        let number = self.set_keys.next(&mut self.rng);
        self.compose_set_of(number, out)
    }

    /// A SET of key `number` (a lookaside client's set after a miss uses it directly).
    pub fn compose_set_of(&mut self, number: u64, out: &mut Vec<u8>) -> Sent {
        self.keys.clear();
        self.push_key(number);
        let size = self.sizes.next(number, &mut self.rng);
        self.value_size = Some(size);
        let exptime = self.expiry.as_ref().map_or(0, |e| e.draw(&mut self.rng));
        let data = self.values.value(size, &mut self.rng);
        match self.protocol {
            Protocol::MemcacheText => Store {
                op: StoreOp::Set,
                key: &self.keys,
                flags: 0,
                exptime: i64::from(exptime),
                data,
                cas_unique: None,
                noreply: false,
            }
            .compose(out),
            Protocol::MemcacheBinary => binary::compose_set(out, &self.keys, 0, exptime, data, 0),
            // memtier sends SETEX for an expiry, a plain SET otherwise (protocol.cpp,
            // redis_protocol::write_command_set).
            Protocol::Redis if exptime > 0 => {
                let seconds = itoa::Buffer::new().format(exptime).as_bytes().to_vec();
                compose_command(out, &[b"SETEX", &self.keys, &seconds, data]);
            }
            Protocol::Redis => compose_set(out, &self.keys, data),
        }
        Sent {
            op: Op::Set,
            keys: 1,
            key: number,
        }
    }

    /// A GET of `n` keys: 1 is a plain GET, more a multi-get.
    fn compose_get(&mut self, out: &mut Vec<u8>, n: usize) -> Sent {
        self.keys.clear();
        self.value_size = None;
        let mut first = 0;
        for i in 0..n {
            let number = self.next_get_key();
            if i == 0 {
                first = number;
            }
            self.push_key(number);
        }
        match self.protocol {
            Protocol::MemcacheText => Get {
                keys: Keys::from_raw(&self.keys),
                cas: false,
            }
            .compose(out),
            Protocol::MemcacheBinary if n == 1 => binary::compose_get(out, &self.keys, 0),
            Protocol::MemcacheBinary => {
                binary::compose_multi_get(out, self.keys.split(|b| *b == b' '), 0)
            }
            Protocol::Redis if n == 1 => compose_get(out, &self.keys),
            Protocol::Redis => compose_mget(out, self.keys.split(|b| *b == b' ')),
        }
        let op = if n == 1 { Op::Get } else { Op::MultiGet };
        Sent {
            op,
            keys: n as u32,
            key: first,
        }
    }
}

/// Reads the reply to `sent` at the front of `buf`: what it said and its length.
pub fn read_reply(
    protocol: Protocol,
    sent: Sent,
    buf: &[u8],
) -> Result<(Outcome, usize), ReplyError> {
    let error = Outcome {
        error: true,
        ..Outcome::default()
    };
    match protocol {
        Protocol::MemcacheText => {
            let expect = if sent.op == Op::Set {
                Expect::Store
            } else {
                Expect::Values
            };
            let (reply, used) = parse_reply(buf, expect)?;
            let outcome = match reply {
                Reply::Stored => Outcome::default(),
                Reply::Values { hits, .. } => Outcome {
                    hits,
                    misses: sent.keys.saturating_sub(hits),
                    error: false,
                },
                _ => error,
            };
            Ok((outcome, used))
        }
        Protocol::MemcacheBinary => read_binary_reply(sent, buf),
        Protocol::Redis => {
            let (reply, used) = parse_resp_reply(buf)?;
            let outcome = match (sent.op, reply) {
                (Op::Set, RespReply::Simple(b"OK")) => Outcome::default(),
                (Op::Get, RespReply::Bulk(value)) => Outcome {
                    hits: u32::from(value.is_some()),
                    misses: u32::from(value.is_none()),
                    error: false,
                },
                (Op::MultiGet, RespReply::Array(Some(elements))) => Outcome {
                    hits: (elements.len() - elements.nulls()) as u32,
                    misses: elements.nulls() as u32,
                    error: false,
                },
                _ => error,
            };
            Ok((outcome, used))
        }
    }
}

/// A binary-protocol response: a miss is status "key not found", any other non-zero
/// status an error; a multi-get's hits are its GETKQ answers before the NOOP.
fn read_binary_reply(sent: Sent, buf: &[u8]) -> Result<(Outcome, usize), ReplyError> {
    let malformed = |e| match e {
        binary::BinaryError::Incomplete => ReplyError::Incomplete,
        binary::BinaryError::Malformed(why) => ReplyError::Malformed(why),
    };
    if sent.op == Op::MultiGet {
        let (hits, used) = binary::parse_multi_get(buf).map_err(malformed)?;
        let outcome = Outcome {
            hits,
            misses: sent.keys.saturating_sub(hits),
            error: false,
        };
        return Ok((outcome, used));
    }
    let r = binary::parse_response(buf).map_err(malformed)?;
    let outcome = match (sent.op, r.status) {
        (Op::Get, binary::STATUS_OK) => Outcome {
            hits: 1,
            ..Outcome::default()
        },
        (Op::Get, binary::STATUS_KEY_NOT_FOUND) => Outcome {
            misses: 1,
            ..Outcome::default()
        },
        (Op::Set, binary::STATUS_OK) => Outcome::default(),
        _ => Outcome {
            error: true,
            ..Outcome::default()
        },
    };
    Ok((outcome, r.len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DataSize, ExpiryRange};
    use crate::cycle::GetKeys;
    use crate::keys::{KeyPattern, KeyRange};
    use crate::sizes::SizePattern;

    fn workload(protocol: Protocol, sets: u32, gets: u32, multiget_keys: usize) -> Workload {
        Workload {
            protocol,
            ratio: Ratio { sets, gets },
            get_keys: GetKeys::Every(multiget_keys),
            data_size: DataSize::Fixed(4),
            expiry: None,
            random_data: false,
            key_prefix: "k:".into(),
            keys: KeyRange::new(0, 99),
            set_pattern: KeyPattern::Sequential,
            get_pattern: KeyPattern::Sequential,
            key_size: None,
            lone_get_share: 0.0,
            lookaside: false,
            preset: None,
            key_dist: None,
        }
    }

    fn generator(w: &Workload) -> Generator {
        Generator::new(
            w,
            1,
            0,
            1,
            Rc::new(Values::new(w.data_size.max(), w.random_data, 1)),
        )
    }

    #[test]
    fn a_key_has_one_size_whatever_the_seed_or_the_client() {
        // A populate run, a warm-up and each load instance run with their own seeds:
        // they must all send key 42 as the same bytes.
        let mut w = workload(Protocol::MemcacheText, 1, 0, 1);
        w.key_size = Some(crate::keysize::KeySize {
            dist: crate::dist::builtin::fb_key(),
            spec: "fb_key".into(),
        });
        let set_of_42 = |seed: u64, client: usize| {
            let values = Rc::new(Values::new(w.data_size.max(), false, seed));
            let mut g = Generator::new(&w, seed, client, 4, values);
            let mut out = Vec::new();
            g.compose_set_of(42, &mut out);
            out.split(|b| *b == b' ').nth(1).unwrap().to_vec()
        };
        let key = set_of_42(1, 0);
        assert!(key.len() > "k:42".len(), "padded to a drawn size");
        assert_eq!(set_of_42(99, 3), key);
    }

    #[test]
    fn the_ratio_is_exact_in_every_cycle() {
        let w = workload(Protocol::MemcacheText, 1, 10, 1);
        let mut g = generator(&w);
        let mut out = Vec::new();
        let ops: Vec<Op> = (0..22).map(|_| g.compose(&mut out).op).collect();
        let sets = ops.iter().filter(|op| **op == Op::Set).count();
        assert_eq!(sets, 2);
        assert_eq!((ops[0], ops[11]), (Op::Set, Op::Set));
    }

    #[test]
    fn memcached_requests_are_set_and_multi_key_get() {
        let w = workload(Protocol::MemcacheText, 1, 1, 3);
        let mut g = generator(&w);
        let mut out = Vec::new();
        assert_eq!(
            g.compose(&mut out),
            Sent {
                op: Op::Set,
                keys: 1,
                key: 0,
            }
        );
        assert_eq!(out, b"set k:0 0 0 4\r\nxxxx\r\n");
        out.clear();
        assert_eq!(
            g.compose(&mut out),
            Sent {
                op: Op::MultiGet,
                keys: 3,
                key: 0,
            }
        );
        assert_eq!(out, b"get k:0 k:1 k:2\r\n");
    }

    #[test]
    fn redis_requests_are_set_get_and_mget() {
        let mut out = Vec::new();
        let mut g = generator(&workload(Protocol::Redis, 1, 1, 1));
        g.compose(&mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nk:0\r\n$4\r\nxxxx\r\n");
        out.clear();
        assert_eq!(g.compose(&mut out).op, Op::Get);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$3\r\nk:0\r\n");
        let mut g = generator(&workload(Protocol::Redis, 0, 1, 2));
        out.clear();
        assert_eq!(g.compose(&mut out).op, Op::MultiGet);
        assert_eq!(out, b"*3\r\n$4\r\nMGET\r\n$3\r\nk:0\r\n$3\r\nk:1\r\n");
    }

    #[test]
    fn memtier_multi_key_gets_ask_for_the_keys_left_in_the_cycle() {
        let mut w = workload(Protocol::MemcacheText, 1, 4, 1);
        w.get_keys = GetKeys::Memtier(3);
        let mut g = generator(&w);
        let mut lines = Vec::new();
        let mut sent = Vec::new();
        for _ in 0..3 {
            let mut out = Vec::new();
            sent.push(g.compose(&mut out));
            lines.push(String::from_utf8(out).unwrap());
        }
        assert_eq!(lines[1], "get k:0 k:1 k:2\r\n");
        assert_eq!(lines[2], "get k:3\r\n");
        let ops: Vec<(Op, u32)> = sent.iter().map(|s| (s.op, s.keys)).collect();
        assert_eq!(ops, [(Op::Set, 1), (Op::MultiGet, 3), (Op::Get, 1)]);
        // Redis and the binary protocol: a 1-key GET is a plain GET there too.
        for protocol in [Protocol::Redis, Protocol::MemcacheBinary] {
            w.protocol = protocol;
            let mut g = generator(&w);
            let mut out = Vec::new();
            let ops: Vec<Op> = (0..3).map(|_| g.compose(&mut out).op).collect();
            assert_eq!(ops, [Op::Set, Op::MultiGet, Op::Get]);
        }
    }

    #[test]
    fn sets_carry_the_expiry_in_each_protocol() {
        let mut w = workload(Protocol::MemcacheText, 1, 0, 1);
        w.expiry = Some(Expiry::Range(ExpiryRange { min: 7, max: 7 }));
        let mut out = Vec::new();
        generator(&w).compose(&mut out);
        assert_eq!(out, b"set k:0 0 7 4\r\nxxxx\r\n");
        w.protocol = Protocol::Redis;
        out.clear();
        generator(&w).compose(&mut out);
        assert_eq!(
            out,
            b"*4\r\n$5\r\nSETEX\r\n$3\r\nk:0\r\n$1\r\n7\r\n$4\r\nxxxx\r\n"
        );
        assert_eq!(
            read_reply(
                Protocol::Redis,
                Sent {
                    op: Op::Set,
                    keys: 1,
                    key: 0,
                },
                b"+OK\r\n"
            )
            .unwrap()
            .0,
            Outcome::default()
        );
        w.protocol = Protocol::MemcacheBinary;
        out.clear();
        generator(&w).compose(&mut out);
        let mut expected = Vec::new();
        binary::compose_set(&mut expected, b"k:0", 0, 7, b"xxxx", 0);
        assert_eq!(out, expected);
        // An expiry of 0 is no expiry: a plain SET.
        w.protocol = Protocol::Redis;
        w.expiry = Some(Expiry::Range(ExpiryRange { min: 0, max: 0 }));
        out.clear();
        generator(&w).compose(&mut out);
        assert!(out.starts_with(b"*3\r\n$3\r\nSET\r\n"));
    }

    #[test]
    fn ranged_random_values_have_sizes_within_the_range() {
        let mut w = workload(Protocol::Redis, 1, 0, 1);
        w.data_size = DataSize::Range {
            min: 10,
            max: 20,
            pattern: SizePattern::Random,
        };
        w.random_data = true;
        let mut g = generator(&w);
        let mut sizes = std::collections::BTreeSet::new();
        for _ in 0..2000 {
            let mut out = Vec::new();
            g.compose(&mut out);
            let Ok((RespReply::Array(Some(args)), _)) = parse_resp_reply(&out) else {
                panic!("not a command")
            };
            let Some(RespReply::Bulk(Some(value))) = args.iter().nth(2) else {
                panic!()
            };
            assert!(value.iter().all(u8::is_ascii_graphic));
            sizes.insert(value.len());
        }
        assert_eq!(sizes, (10..=20).collect());
    }

    #[test]
    fn allkeys_budget_is_the_writing_patterns_share() {
        let mut w = workload(Protocol::Redis, 1, 0, 1);
        w.set_pattern = KeyPattern::Parallel;
        let values = Rc::new(Values::new(w.data_size.max(), false, 1));
        let g = Generator::new(&w, 1, 2, 3, values);
        // Client 2 of 3 over keys 0..=99 holds keys 66..=99.
        assert_eq!(g.budget(Some(Requests::AllKeys)), Some(34));
        assert_eq!(g.budget(Some(Requests::PerClient(5))), Some(5));
        assert_eq!(g.budget(None), None);
    }

    #[test]
    fn memcached_replies_count_hits_misses_and_errors() {
        let get3 = Sent {
            op: Op::MultiGet,
            keys: 3,
            key: 0,
        };
        let reply = b"VALUE k:1 0 1\r\nx\r\nEND\r\n";
        assert_eq!(
            read_reply(Protocol::MemcacheText, get3, reply),
            Ok((
                Outcome {
                    hits: 1,
                    misses: 2,
                    error: false
                },
                reply.len()
            ))
        );
        let set = Sent {
            op: Op::Set,
            keys: 1,
            key: 0,
        };
        assert_eq!(
            read_reply(Protocol::MemcacheText, set, b"STORED\r\n"),
            Ok((Outcome::default(), 8))
        );
        assert!(
            read_reply(
                Protocol::MemcacheText,
                set,
                b"SERVER_ERROR out of memory\r\n"
            )
            .unwrap()
            .0
            .error
        );
        assert_eq!(
            read_reply(Protocol::MemcacheText, set, b"STOR"),
            Err(ReplyError::Incomplete)
        );
    }

    #[test]
    fn redis_replies_count_hits_misses_and_errors() {
        let get = Sent {
            op: Op::Get,
            keys: 1,
            key: 0,
        };
        assert_eq!(
            read_reply(Protocol::Redis, get, b"$-1\r\n").unwrap().0,
            Outcome {
                hits: 0,
                misses: 1,
                error: false
            }
        );
        assert_eq!(
            read_reply(Protocol::Redis, get, b"$1\r\nx\r\n").unwrap().0,
            Outcome {
                hits: 1,
                misses: 0,
                error: false
            }
        );
        let mget = Sent {
            op: Op::MultiGet,
            keys: 3,
            key: 0,
        };
        let reply = b"*3\r\n$1\r\na\r\n$-1\r\n$-1\r\n";
        assert_eq!(
            read_reply(Protocol::Redis, mget, reply).unwrap().0,
            Outcome {
                hits: 1,
                misses: 2,
                error: false
            }
        );
        let set = Sent {
            op: Op::Set,
            keys: 1,
            key: 0,
        };
        assert!(
            read_reply(Protocol::Redis, set, b"-OOM command not allowed\r\n")
                .unwrap()
                .0
                .error
        );
        assert!(
            !read_reply(Protocol::Redis, set, b"+OK\r\n")
                .unwrap()
                .0
                .error
        );
    }
}
