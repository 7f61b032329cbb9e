//! A trace record composed into a request for memcached (text or binary) or Redis, at its
//! recorded sizes: a key shorter than its recorded size is padded to it with `_` (a
//! longer one is sent whole: cutting it would merge keys), and a write's value has the
//! recorded value size.
//!
//! | trace op | memcached text, binary | Redis |
//! |---|---|---|
//! | get, gets | `get`, `gets` / GET | GET (Redis has no CAS token) |
//! | set | `set` / SET | SET (`EX ttl` when the TTL is not 0) |
//! | add, replace | `add`, `replace` / ADD, REPLACE | SET ... NX, SET ... XX |
//! | cas | `set` / SET (a trace has no CAS token to compare) | SET |
//! | append, prepend | `append`, `prepend` / APPEND, PREPEND | APPEND (Redis has no prepend) |
//! | delete | `delete` / DELETE | DEL |
//! | incr, decr | `incr k 1`, `decr k 1` / INCREMENT, DECREMENT by 1, not creating | INCR, DECR |
//!
//! A TTL over 30 days is sent to memcached as 30 days: memcached reads a larger
//! expiry as a Unix time, which would expire the item at once.

use cachelab_protocol::binary;
use cachelab_protocol::resp::compose_command;
use cachelab_protocol::{Arith, ArithOp, Delete, Expect, Get, Keys, Store, StoreOp};

use super::{Record, TraceOp};
use crate::config::Protocol;

/// memcached's largest relative expiry (`REALTIME_MAXDELTA`): 30 days in seconds.
pub const MEMCACHED_MAX_RELATIVE_TTL: u32 = 60 * 60 * 24 * 30;

/// The byte a short key is padded with.
pub const KEY_PAD: u8 = b'_';

/// Composes records for one protocol, keeping the padded key and the value bytes between
/// calls so that composing allocates only when a value is larger than any before.
#[derive(Debug)]
pub struct Composer {
    protocol: Protocol,
    key: Vec<u8>,
    /// `x` bytes, as long as the largest value composed so far (the reader bounds it).
    values: Vec<u8>,
}

impl Composer {
    pub fn new(protocol: Protocol) -> Composer {
        Composer {
            protocol,
            key: Vec::with_capacity(256),
            values: Vec::new(),
        }
    }

    /// Writes the request for `record` to `out`, and says which reply answers it (for
    /// Redis, [`Expect::Resp`]; for the binary protocol, one response to the packet).
    pub fn compose(&mut self, record: &Record, out: &mut Vec<u8>) -> Expect {
        self.key.clear();
        self.key.extend_from_slice(&record.key);
        let size = record.key_size as usize;
        if self.key.len() < size {
            self.key.resize(size, KEY_PAD);
        }
        let value_size = if record.op.carries_value() {
            record.value_size as usize
        } else {
            0
        };
        if self.values.len() < value_size {
            self.values.resize(value_size, b'x');
        }
        let (key, value) = (&self.key[..], &self.values[..value_size]);
        match self.protocol {
            Protocol::MemcacheText => text(record, key, value, out),
            Protocol::MemcacheBinary => binary(record, key, value, out),
            Protocol::Redis => {
                redis(record, key, value, out);
                return Expect::Resp;
            }
        }
        expect(record.op)
    }

    /// The key of the last request composed, padded to its recorded size.
    pub fn key(&self) -> &[u8] {
        &self.key
    }
}

/// The kind of memcached reply that answers a request of `op`.
pub fn expect(op: TraceOp) -> Expect {
    match op {
        TraceOp::Get | TraceOp::Gets => Expect::Values,
        TraceOp::Delete => Expect::Delete,
        TraceOp::Incr | TraceOp::Decr => Expect::Arith,
        _ => Expect::Store,
    }
}

fn memcached_ttl(ttl: u32) -> u32 {
    ttl.min(MEMCACHED_MAX_RELATIVE_TTL)
}

fn text(record: &Record, key: &[u8], data: &[u8], out: &mut Vec<u8>) {
    let store = |op| Store {
        op,
        key,
        flags: 0,
        exptime: i64::from(memcached_ttl(record.ttl)),
        data,
        cas_unique: None,
        noreply: false,
    };
    let arith = |op| Arith {
        op,
        key,
        delta: 1,
        noreply: false,
    };
    match record.op {
        TraceOp::Get | TraceOp::Gets => {
            Get {
                keys: Keys::from_raw(key),
                cas: record.op == TraceOp::Gets,
            }
            .compose(out);
        }
        TraceOp::Set | TraceOp::Cas => store(StoreOp::Set).compose(out),
        TraceOp::Add => store(StoreOp::Add).compose(out),
        TraceOp::Replace => store(StoreOp::Replace).compose(out),
        TraceOp::Append => store(StoreOp::Append).compose(out),
        TraceOp::Prepend => store(StoreOp::Prepend).compose(out),
        TraceOp::Delete => Delete {
            key,
            noreply: false,
        }
        .compose(out),
        TraceOp::Incr => arith(ArithOp::Incr).compose(out),
        TraceOp::Decr => arith(ArithOp::Decr).compose(out),
    }
}

fn binary(record: &Record, key: &[u8], data: &[u8], out: &mut Vec<u8>) {
    let ttl = memcached_ttl(record.ttl);
    let store =
        |out: &mut Vec<u8>, opcode| binary::compose_store(out, opcode, key, 0, ttl, data, 0);
    match record.op {
        TraceOp::Get | TraceOp::Gets => binary::compose_get(out, key, 0),
        TraceOp::Set | TraceOp::Cas => store(out, binary::OP_SET),
        TraceOp::Add => store(out, binary::OP_ADD),
        TraceOp::Replace => store(out, binary::OP_REPLACE),
        TraceOp::Append => binary::compose_concat(out, binary::OP_APPEND, key, data, 0),
        TraceOp::Prepend => binary::compose_concat(out, binary::OP_PREPEND, key, data, 0),
        TraceOp::Delete => binary::compose_delete(out, key, 0),
        TraceOp::Incr | TraceOp::Decr => {
            let opcode = if record.op == TraceOp::Incr {
                binary::OP_INCREMENT
            } else {
                binary::OP_DECREMENT
            };
            binary::compose_arith(out, opcode, key, 1, binary::ARITH_NO_CREATE, 0);
        }
    }
}

fn redis(record: &Record, key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let ttl = itoa::Buffer::new().format(record.ttl).as_bytes().to_vec();
    let set = |out: &mut Vec<u8>, condition: Option<&[u8]>| {
        let mut args: Vec<&[u8]> = vec![b"SET", key, value];
        args.extend(condition);
        if record.ttl > 0 {
            args.extend([&b"EX"[..], &ttl]);
        }
        compose_command(out, &args);
    };
    match record.op {
        TraceOp::Get | TraceOp::Gets => compose_command(out, &[b"GET", key]),
        TraceOp::Set | TraceOp::Cas => set(out, None),
        TraceOp::Add => set(out, Some(b"NX")),
        TraceOp::Replace => set(out, Some(b"XX")),
        TraceOp::Append | TraceOp::Prepend => compose_command(out, &[b"APPEND", key, value]),
        TraceOp::Delete => compose_command(out, &[b"DEL", key]),
        TraceOp::Incr => compose_command(out, &[b"INCR", key]),
        TraceOp::Decr => compose_command(out, &[b"DECR", key]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(op: TraceOp, key: &str, key_size: u32, value_size: u32, ttl: u32) -> Record {
        Record {
            key: key.as_bytes().to_vec(),
            key_size,
            value_size,
            op,
            ttl,
            ..Record::default()
        }
    }

    fn composed(protocol: Protocol, r: &Record) -> (String, Expect) {
        let mut out = Vec::new();
        let expect = Composer::new(protocol).compose(r, &mut out);
        (String::from_utf8_lossy(&out).into_owned(), expect)
    }

    #[test]
    fn a_short_key_is_padded_to_its_recorded_size_and_a_value_has_its_size() {
        let r = record(TraceOp::Set, "ab", 5, 3, 0);
        assert_eq!(
            composed(Protocol::MemcacheText, &r),
            ("set ab___ 0 0 3\r\nxxx\r\n".into(), Expect::Store)
        );
        let long = record(TraceOp::Get, "abcdef", 2, 99, 0);
        assert_eq!(composed(Protocol::MemcacheText, &long).0, "get abcdef\r\n");
    }

    #[test]
    fn memcached_text_sends_each_op_as_itself_but_cas_as_set() {
        let cases = [
            (TraceOp::Get, "get k\r\n", Expect::Values),
            (TraceOp::Gets, "gets k\r\n", Expect::Values),
            (TraceOp::Add, "add k 0 7 1\r\nx\r\n", Expect::Store),
            (TraceOp::Replace, "replace k 0 7 1\r\nx\r\n", Expect::Store),
            (TraceOp::Cas, "set k 0 7 1\r\nx\r\n", Expect::Store),
            (TraceOp::Append, "append k 0 7 1\r\nx\r\n", Expect::Store),
            (TraceOp::Prepend, "prepend k 0 7 1\r\nx\r\n", Expect::Store),
            (TraceOp::Delete, "delete k\r\n", Expect::Delete),
            (TraceOp::Incr, "incr k 1\r\n", Expect::Arith),
            (TraceOp::Decr, "decr k 1\r\n", Expect::Arith),
        ];
        for (op, line, expect) in cases {
            let got = composed(Protocol::MemcacheText, &record(op, "k", 1, 1, 7));
            assert_eq!(got, (line.to_string(), expect), "{op:?}");
        }
    }

    #[test]
    fn redis_gets_get_add_is_nx_delete_is_del_and_ttl_is_ex() {
        let cases = [
            (TraceOp::Gets, 0, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
            (TraceOp::Set, 0, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nx\r\n"),
            (
                TraceOp::Add,
                9,
                "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nx\r\n$2\r\nNX\r\n$2\r\nEX\r\n$1\r\n9\r\n",
            ),
            (
                TraceOp::Replace,
                0,
                "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nx\r\n$2\r\nXX\r\n",
            ),
            (
                TraceOp::Prepend,
                0,
                "*3\r\n$6\r\nAPPEND\r\n$1\r\nk\r\n$1\r\nx\r\n",
            ),
            (TraceOp::Delete, 0, "*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"),
            (TraceOp::Incr, 0, "*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n"),
            (TraceOp::Decr, 0, "*2\r\n$4\r\nDECR\r\n$1\r\nk\r\n"),
        ];
        for (op, ttl, wire) in cases {
            let got = composed(Protocol::Redis, &record(op, "k", 1, 1, ttl));
            assert_eq!(got, (wire.to_string(), Expect::Resp), "{op:?}");
        }
    }

    #[test]
    fn binary_writes_use_their_own_opcodes() {
        let cases = [
            (TraceOp::Get, binary::OP_GET),
            (TraceOp::Set, binary::OP_SET),
            (TraceOp::Cas, binary::OP_SET),
            (TraceOp::Add, binary::OP_ADD),
            (TraceOp::Replace, binary::OP_REPLACE),
            (TraceOp::Append, binary::OP_APPEND),
            (TraceOp::Prepend, binary::OP_PREPEND),
            (TraceOp::Delete, binary::OP_DELETE),
            (TraceOp::Incr, binary::OP_INCREMENT),
            (TraceOp::Decr, binary::OP_DECREMENT),
        ];
        for (op, opcode) in cases {
            let mut out = Vec::new();
            Composer::new(Protocol::MemcacheBinary).compose(&record(op, "k", 4, 10, 0), &mut out);
            assert_eq!(out[1], opcode, "{op:?}");
            // The padded key is in the packet.
            assert!(out.windows(4).any(|w| w == b"k___"), "{op:?}");
        }
    }

    #[test]
    fn a_ttl_over_30_days_is_30_days_for_memcached() {
        let r = record(TraceOp::Set, "k", 1, 1, 40 * 24 * 3600);
        assert_eq!(
            composed(Protocol::MemcacheText, &r).0,
            "set k 0 2592000 1\r\nx\r\n"
        );
    }
}
