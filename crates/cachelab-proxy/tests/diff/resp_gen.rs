//! A seeded generator of RESP requests, valid and malformed, for the differential fuzz.
//!
//! Data commands the proxy routes (strings, counters, expiry, lists, hashes, sets,
//! sorted sets, the split `MGET`/`MSET`/`DEL`/`EXISTS`/`TOUCH`/`UNLINK`, multi-key
//! commands on one hash tag, `EVAL` with a key), the proxy's own answers (`PING`,
//! `ECHO`, `SELECT 0`, `QUIT`), unknown and refused commands, wrong argument counts, and
//! malformed frames. Sent as arrays of bulk strings, or inline.
//!
//! Left out, because they differ from Redis on purpose or by the clock: `INFO` (the
//! proxy's own counters), commands Redis knows and the proxy's table does not (Redis
//! runs them, the proxy calls them unknown), expiry short enough to pass during a run,
//! random replies (`SPOP`, `SRANDMEMBER`) and set orders (a hash table's order depends
//! on its server's hash seed), an argument count between the proxy's bound (2^20) and
//! Redis's (2^31), a bulk string between `--max-value-size` and Redis's 512 MiB.
//! Multi-key commands that cannot be split use keys of one hash tag, so that a sharded
//! pool never refuses them for spanning servers.
//!
//! Keys are `<namespace><name>`: the driver gives each connection a namespace of its own
//! for requests it pipelines beside other connections' (so their replies do not depend
//! on the order the servers saw them in) and a shared one for requests sent alone.

use rand::{Rng, RngExt};

use super::resp_frames::{array, inline, mutated};
use super::resp_rules::{Known, REDIS_TEXTS, REFUSED};

/// `big` alone may hold values larger than a read (see `RespGen::value_for`).
const NAMES: &[&str] = &[
    "a",
    "b",
    "n",
    "l",
    "big",
    "{t}x",
    "{t}y",
    "{t}z",
    "odd key\r\n\0",
];
/// One hash tag: on one server of any pool.
const TAGGED: &[&str] = &["{t}x", "{t}y", "{t}z"];
/// Names neither Redis nor the proxy knows.
const UNKNOWN: &[&str] = &[
    "FOO",
    "bogus",
    "GETT",
    "x-y",
    "abcdefghijklmnopqrstuvwxyz0123",
];

/// One request and how to judge its reply.
#[derive(Debug, Clone)]
pub struct RespRequest {
    pub wire: Vec<u8>,
    /// The frame is unfinished, or may swallow what follows it: it is sent last and the
    /// connection's writing ended, so what compares is each side's reaction to the end
    /// of input.
    pub last: bool,
    /// The server closes the connection after answering it (a protocol error, `QUIT`):
    /// it is sent after every earlier answer was read and nothing follows it but its
    /// sync, because Redis closing with replies unwritten and requests unread resets
    /// the connection and loses what it had not sent, however much that was.
    pub closes: bool,
    /// The proxy answers it as a rule of docs/redis-pools.md says, not as Redis would.
    pub known: Option<Known>,
    /// Its reply reads the clock (see `resp_rules::normalize`).
    pub clock: bool,
}

pub struct RespGen<R> {
    rng: R,
}

type Args = Vec<Vec<u8>>;

fn args(words: &[&str]) -> Args {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

impl<R: Rng> RespGen<R> {
    pub fn new(rng: R) -> Self {
        RespGen { rng }
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.rng.random_range(0..items.len())]
    }

    fn key(&mut self, ns: &str) -> Vec<u8> {
        [ns.as_bytes(), self.pick(NAMES).as_bytes()].concat()
    }

    fn tagged(&mut self, ns: &str) -> Vec<u8> {
        [ns.as_bytes(), self.pick(TAGGED).as_bytes()].concat()
    }

    /// Up to `most` keys, now and then many more (a split over every shard).
    fn keys(&mut self, ns: &str, most: usize) -> Args {
        let most = if self.chance(3) { 60 } else { most };
        (0..self.rng.random_range(1..=most))
            .map(|_| self.key(ns))
            .collect()
    }

    /// A value to store under `key`: under `big`, now and then one larger than a read
    /// (replies cross reads, and an MGET's parts too). Only there, so that a request
    /// whose reply can be large is known by its key: Redis drops the part of a reply it
    /// has not written when it reads the end of its input, so such a request is never
    /// the last of a connection (`resp_frames::mutated`).
    fn value_for(&mut self, key: &[u8]) -> Vec<u8> {
        if key.ends_with(b"big") && self.chance(30) {
            let len = self.rng.random_range(10_000..300_000);
            return vec![*self.pick(b"LVW"); len];
        }
        self.value()
    }

    fn value(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..100) {
            0 => b"".to_vec(),
            1..=30 => self.rng.random_range(-5..1000i32).to_string().into_bytes(),
            31..=40 => b"3.5".to_vec(),
            41..=50 => b"a b\r\n\0\"'".to_vec(),
            _ => {
                let len = self.rng.random_range(0..20);
                (0..len).map(|_| *self.pick(b"abcxyz0189 ")).collect()
            }
        }
    }

    fn number(&mut self) -> Vec<u8> {
        let words = [
            "0",
            "1",
            "-1",
            "7",
            "x",
            "1.5",
            "9223372036854775807",
            "+3",
            "03",
        ];
        self.pick(&words).as_bytes().to_vec()
    }

    /// An expiry in seconds that cannot pass during a run, or one that is refused or
    /// deletes at once.
    fn expiry(&mut self) -> Vec<u8> {
        let words = ["1000", "100000", "0", "-1", "x", "9999999999999999"];
        self.pick(&words).as_bytes().to_vec()
    }

    /// Command names in Redis's case-insensitive forms.
    fn name(&mut self, name: &str) -> Vec<u8> {
        match self.rng.random_range(0..10) {
            0 => name.to_ascii_lowercase().into_bytes(),
            1 => name
                .bytes()
                .enumerate()
                .map(|(i, b)| {
                    if i % 2 == 0 {
                        b.to_ascii_lowercase()
                    } else {
                        b
                    }
                })
                .collect(),
            _ => name.as_bytes().to_vec(),
        }
    }

    fn cmd(&mut self, name: &str, rest: Args) -> Args {
        let mut out = vec![self.name(name)];
        out.extend(rest);
        out
    }

    /// One request, as bytes on the wire, in namespace `ns`.
    pub fn request(&mut self, ns: &str) -> RespRequest {
        let (args, known, clock) = self.command(ns);
        if args.is_empty() {
            const EMPTY: [&[u8]; 4] = [b"*0\r\n", b"*-1\r\n", b"\r\n", b"  \t \r\n"];
            return RespRequest {
                wire: self.pick(&EMPTY).to_vec(),
                last: false,
                closes: false,
                known: None,
                clock: false,
            };
        }
        if known.is_none() && self.chance(8) {
            if let Some(mut request) = mutated(&mut self.rng, &args) {
                request.clock = clock;
                return request;
            }
        }
        // Inline only under Redis's 64 KiB line: past it, where Redis notices the line
        // is too long depends on how its 16 KiB reads fall (the proxy's bound is exact).
        let size: usize = args.iter().map(Vec::len).sum();
        let wire = if size < 60_000 && self.chance(20) {
            inline(&args)
        } else {
            array(&args)
        };
        RespRequest {
            wire,
            last: false,
            closes: args[0].eq_ignore_ascii_case(b"QUIT"),
            known,
            clock,
        }
    }

    /// A command's arguments (none: an empty command), the rule it differs by, and
    /// whether its reply reads the clock.
    fn command(&mut self, ns: &str) -> (Args, Option<Known>, bool) {
        let mut known = None;
        let mut clock = false;
        let args = match self.rng.random_range(0..40) {
            0..=3 => self.set(ns),
            4..=5 => {
                let k = self.key(ns);
                self.cmd("GET", vec![k])
            }
            6 => {
                let name = *self.pick(&["SETNX", "GETSET", "APPEND"]);
                let k = self.key(ns);
                let v = self.value_for(&k);
                self.cmd(name, vec![k, v])
            }
            7 => {
                let name = *self.pick(&["GETDEL", "STRLEN", "INCR", "DECR", "TYPE", "PERSIST"]);
                let k = self.key(ns);
                self.cmd(name, vec![k])
            }
            8 => {
                let name = *self.pick(&["INCRBY", "DECRBY", "INCRBYFLOAT"]);
                let (k, n) = (self.key(ns), self.number());
                self.cmd(name, vec![k, n])
            }
            9 => {
                let k = self.key(ns);
                let (a, b) = (self.number(), self.number());
                if self.chance(50) {
                    self.cmd("GETRANGE", vec![k, a, b])
                } else {
                    let v = self.value_for(&k);
                    self.cmd("SETRANGE", vec![k, b"2".to_vec(), v])
                }
            }
            10..=12 => {
                let keys = self.keys(ns, 6);
                self.cmd("MGET", keys)
            }
            13..=14 => {
                let mut pairs = Vec::new();
                for k in self.keys(ns, 4) {
                    let v = self.value_for(&k);
                    pairs.push(k);
                    pairs.push(v);
                }
                if self.chance(10) {
                    pairs.pop(); // an odd count: Redis's arity error
                }
                self.cmd("MSET", pairs)
            }
            15..=16 => {
                let name = *self.pick(&["DEL", "EXISTS", "TOUCH", "UNLINK"]);
                let keys = self.keys(ns, 5);
                self.cmd(name, keys)
            }
            17 => {
                let name = *self.pick(&["EXPIRE", "PEXPIRE"]);
                let (k, mut e) = (self.key(ns), self.expiry());
                if name == "PEXPIRE" && e.len() > 1 && e[0] != b'-' && e[0] != b'x' {
                    e.extend(b"000"); // the same time in milliseconds
                }
                let mut rest = vec![k, e];
                if self.chance(20) {
                    rest.push(
                        self.pick(&["NX", "XX", "GT", "LT", "ZZ"])
                            .as_bytes()
                            .to_vec(),
                    );
                }
                self.cmd(name, rest)
            }
            18 => {
                clock = true;
                let name = *self.pick(&["TTL", "PTTL"]);
                let k = self.key(ns);
                self.cmd(name, vec![k])
            }
            19..=20 => self.collection(ns),
            21 => self.one_tag(ns),
            22 => self.eval(ns),
            23..=24 => self.local(),
            25 => {
                let name = *self.pick(UNKNOWN);
                let mut rest = self.keys(ns, 3);
                if self.chance(20) {
                    rest.push(vec![b'q'; 200]); // past the 128 bytes Redis quotes
                }
                self.cmd(name, rest)
            }
            26 => {
                let words = *self.pick(REFUSED);
                known = Some(Known::Refused(words[0].to_string()));
                self.cmd(words[0], args(&words[1..]))
            }
            27 => {
                if self.chance(50) {
                    known = Some(Known::NoKeys("EVAL".into()));
                    self.cmd("EVAL", args(&["return 1", "0"]))
                } else {
                    let db = *self.pick(&["1", "15", "99"]);
                    known = Some(Known::OtherDb(db.into()));
                    self.cmd("SELECT", args(&[db]))
                }
            }
            28 => self.wrong_arity(ns),
            29 => Vec::new(),
            30 if self.chance(20) => self.cmd("QUIT", Vec::new()),
            31 => {
                let words = *self.pick(REDIS_TEXTS);
                args(words)
            }
            _ => {
                let k = self.key(ns);
                self.cmd("GET", vec![k])
            }
        };
        (args, known, clock)
    }

    fn set(&mut self, ns: &str) -> Args {
        let k = self.key(ns);
        let v = self.value_for(&k);
        let mut rest = vec![k, v];
        match self.rng.random_range(0..12) {
            0 => rest.extend([b"EX".to_vec(), self.expiry()]),
            1 => rest.extend([b"PX".to_vec(), b"100000000".to_vec()]),
            2 => rest.push(b"NX".to_vec()),
            3 => rest.push(b"XX".to_vec()),
            4 => rest.push(b"GET".to_vec()),
            5 => rest.push(b"KEEPTTL".to_vec()),
            6 => rest.extend([b"EX".to_vec()]), // a syntax error
            7 => rest.extend([b"NX".to_vec(), b"XX".to_vec()]),
            _ => {}
        }
        self.cmd("SET", rest)
    }

    /// Lists, hashes, sets and sorted sets, on the same keys as strings (so some get
    /// `WRONGTYPE`).
    fn collection(&mut self, ns: &str) -> Args {
        let k = self.key(ns);
        // Large values go into lists only: a hash or set holding one becomes a hash
        // table, whose order (HGETALL) depends on its server's random hash seed.
        let (v, w, large) = (self.value(), self.value(), self.value_for(&k));
        let words: &[&str] = match self.rng.random_range(0..16) {
            0 => return self.cmd("LPUSH", vec![k, large, w]),
            1 => return self.cmd("RPUSH", vec![k, large]),
            2 => &["LRANGE", "0", "-1"],
            3 => &["LLEN"],
            4 => &["LPOP", "2"],
            5 => return self.cmd("HSET", vec![k, v.clone(), w, b"f".to_vec(), v]),
            6 => return self.cmd("HGET", vec![k, v]),
            7 => &["HGETALL"],
            8 => &["HINCRBY", "f", "3"],
            9 => return self.cmd("HDEL", vec![k, b"f".to_vec(), v]),
            10 => return self.cmd("SADD", vec![k, v, w]),
            11 => return self.cmd("SISMEMBER", vec![k, v]),
            12 => &["SCARD"],
            13 => return self.cmd("ZADD", vec![k, b"1.5".to_vec(), v]),
            14 => &["ZRANGE", "0", "-1", "WITHSCORES"],
            _ => &["ZINCRBY", "2", "m"],
        };
        let mut rest = vec![k];
        rest.extend(args(&words[1..]));
        self.cmd(words[0], rest)
    }

    /// Multi-key commands that are never split: their keys share one hash tag.
    fn one_tag(&mut self, ns: &str) -> Args {
        let (a, b, c) = (self.tagged(ns), self.tagged(ns), self.tagged(ns));
        match self.rng.random_range(0..7) {
            0 => self.cmd("RENAME", vec![a, b]),
            1 => self.cmd("RENAMENX", vec![a, b]),
            2 => self.cmd("RPOPLPUSH", vec![a, b]),
            3 => self.cmd("LMOVE", vec![a, b, b"LEFT".to_vec(), b"RIGHT".to_vec()]),
            4 => self.cmd("SUNIONSTORE", vec![a, b, c]),
            5 => self.cmd("SINTERSTORE", vec![a, b, c]),
            _ => {
                let (v, w) = (self.value(), self.value());
                self.cmd("MSETNX", vec![a, v, b, w])
            }
        }
    }

    /// `EVAL` routed by its one key, replies of every type (nested arrays within the
    /// reply parser's depth).
    fn eval(&mut self, ns: &str) -> Args {
        let scripts = [
            "return redis.call('GET', KEYS[1])",
            "return redis.call('INCR', KEYS[1])",
            "return {1, {2, 'x', {KEYS[1]}}, ARGV[1]}",
            "return redis.status_reply('FINE')",
            "return redis.error_reply('MY ERR')",
        ];
        let script = *self.pick(&scripts);
        let (k, v) = (self.key(ns), self.value());
        let name = self.name("EVAL");
        vec![name, script.as_bytes().to_vec(), b"1".to_vec(), k, v]
    }

    /// What the proxy answers itself as Redis would.
    fn local(&mut self) -> Args {
        let v = self.value();
        match self.rng.random_range(0..7) {
            0 => self.cmd("PING", Vec::new()),
            1 => self.cmd("PING", vec![v]),
            2 => self.cmd("ECHO", vec![v]),
            3 => self.cmd("ECHO", Vec::new()),
            4 => self.cmd("SELECT", args(&["0"])),
            5 => self.cmd("SELECT", args(&["0", "1"])),
            _ => self.cmd("PING", vec![v.clone(), v]),
        }
    }

    /// A routed command with too few or too many arguments: Redis's arity error.
    fn wrong_arity(&mut self, ns: &str) -> Args {
        let name = *self.pick(&["GET", "SET", "INCR", "STRLEN", "MGET", "DEL", "TTL", "HGET"]);
        let n = match name {
            "MGET" | "DEL" => 0,
            "SET" | "HGET" => self.rng.random_range(0..2),
            _ => *self.pick(&[0, 2, 3]),
        };
        let keys = (0..n).map(|_| self.key(ns)).collect();
        self.cmd(name, keys)
    }
}
