//! The net layer's decoding step: bytes in, a classified request, a rejection or a
//! discard out. Pure: the connection task owns the buffer and does the I/O.

use cachelab_protocol::{
    parse_request, parse_request_to, Discard, Expect, Invalid, Limits, MetaCmd, ParseError,
    Request, StoreOp,
};

use crate::metrics::OpKind;
use crate::routing::plan::Access;
use crate::routing::spans::KeySpans;

/// How a request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Sent to the servers by a worker.
    Forward(Forward),
    /// Answered by the net layer itself.
    Local(Local),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    pub op: OpKind,
    pub expect: Expect,
    pub keys: u32,
    /// Reads go to one server (or, split, to several); writes to every server that
    /// holds the key; flush_all to every server of the pool.
    pub access: Access,
    pub noreply: bool,
    /// A meta command with the `q` flag: the servers get it without, and the worker
    /// leaves out the replies quiet mode leaves out.
    pub quiet: Option<MetaCmd>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    Version,
    Stats,
    /// `stats <argument>`: only the general statistics are served.
    StatsUnsupported,
    Verbosity {
        noreply: bool,
    },
    /// `mn`: answered `MN` after every reply owed before it.
    MetaNoop,
    Quit,
}

/// One decoding step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not enough bytes for anything; read more.
    Incomplete,
    /// Bytes dropped while resynchronising after a rejected request.
    Skipped(usize),
    /// A rejected request of `consumed` bytes: its reply line (unless silent), the
    /// connection to close (`then` is [`Discard::Close`]), a key to unlink.
    Reject(Invalid),
    Request {
        len: usize,
        class: Class,
        /// Where a multi-key request's keys are (empty otherwise).
        spans: KeySpans,
    },
    /// A binary-protocol request (its first byte is the request magic 0x80): we speak
    /// only the text protocol, and a binary client would wait forever for a text reply.
    Binary,
}

/// The binary protocol's request magic byte.
pub const BINARY_REQUEST_MAGIC: u8 = 0x80;

/// A binary-protocol error response to the request whose header starts `request`:
/// status 0x0081 (unknown command), the request's opcode and opaque echoed, and the
/// reason as the body, so a binary client gets an answer it can read.
pub fn binary_error(request: &[u8]) -> Vec<u8> {
    const BODY: &[u8] = b"cachelab-proxy speaks the text protocol only";
    let opcode = request.get(1).copied().unwrap_or(0);
    let opaque = request.get(12..16).unwrap_or(&[0; 4]);
    let mut out = Vec::with_capacity(24 + BODY.len());
    out.extend_from_slice(&[0x81, opcode, 0, 0, 0, 0, 0x00, 0x81]);
    out.extend_from_slice(&(BODY.len() as u32).to_be_bytes());
    out.extend_from_slice(opaque);
    out.extend_from_slice(&[0; 8]); // cas
    out.extend_from_slice(BODY);
    out
}

/// The per-connection decoder: the parser plus what is left to discard.
#[derive(Debug)]
pub struct Decoder {
    discard: Discard,
    /// Leading bytes of the buffer known to hold no newline: a command line arriving in
    /// many reads is searched once, not again from its start on every read (a line may
    /// be `--max-line-length` long, 64 KiB by default).
    no_newline: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            discard: Discard::Nothing,
            no_newline: 0,
        }
    }
}

impl Decoder {
    /// Whether the decoder is skipping the rest of a rejected request.
    pub fn is_discarding(&self) -> bool {
        self.discard != Discard::Nothing
    }

    pub fn step(&mut self, buf: &[u8], limits: &Limits) -> Step {
        match self.discard {
            Discard::Nothing => {}
            Discard::Bytes(remaining) => {
                let n = usize::try_from(remaining)
                    .unwrap_or(usize::MAX)
                    .min(buf.len());
                if n == 0 {
                    return Step::Incomplete;
                }
                let left = remaining - n as u64;
                self.discard = if left == 0 {
                    Discard::Nothing
                } else {
                    Discard::Bytes(left)
                };
                return Step::Skipped(n);
            }
            Discard::Close => return Step::Incomplete,
            Discard::ThroughNewline => {
                return match memchr::memchr(b'\n', buf) {
                    Some(i) => {
                        self.discard = Discard::Nothing;
                        Step::Skipped(i + 1)
                    }
                    None if buf.is_empty() => Step::Incomplete,
                    None => Step::Skipped(buf.len()),
                }
            }
        }
        match buf.first() {
            None => return Step::Incomplete,
            Some(&BINARY_REQUEST_MAGIC) => return Step::Binary,
            Some(_) => {}
        }
        // Without a newline the parser can only ask for more, until the line is too
        // long (its `scan_line` window): the same answer without reading it again. A
        // newline found here is handed to the parser, which then does not look for it.
        let limit = limits.max_line_len.saturating_add(2);
        let window = buf.len().min(limit);
        let from = self.no_newline.min(window);
        let newline = memchr::memchr(b'\n', &buf[from..window]).map(|i| from + i);
        if newline.is_none() && buf.len() < limit {
            self.no_newline = buf.len();
            return Step::Incomplete;
        }
        self.no_newline = 0;
        let parsed = match newline {
            Some(newline) => parse_request_to(buf, newline, limits),
            None => parse_request(buf, limits),
        };
        match parsed {
            Ok((request, len)) => {
                let spans = match &request {
                    Request::Get(get) if get.keys.len() > 1 => KeySpans::of(buf, get.keys.iter()),
                    _ => KeySpans::default(),
                };
                Step::Request {
                    len,
                    class: classify(&request),
                    spans,
                }
            }
            Err(ParseError::Incomplete) => Step::Incomplete,
            Err(ParseError::Invalid(invalid)) => {
                self.discard = invalid.then;
                Step::Reject(invalid)
            }
        }
    }
}

pub fn classify(request: &Request<'_>) -> Class {
    let forward = |op, expect, keys, access| {
        Class::Forward(Forward {
            op,
            expect,
            keys,
            access,
            noreply: request.noreply(),
            quiet: None,
        })
    };
    match request {
        Request::Get(get) => {
            let keys = get.keys.len() as u32;
            let op = if keys > 1 {
                OpKind::MultiGet
            } else {
                OpKind::Get
            };
            let access = if get.cas {
                Access::ReadCas
            } else {
                Access::Read
            };
            forward(op, Expect::Values, keys, access)
        }
        Request::Store(store) => {
            let access = if store.op == StoreOp::Cas {
                Access::WriteCas
            } else {
                Access::Write
            };
            forward(OpKind::Set, Expect::Store, 1, access)
        }
        Request::Delete(_) => forward(OpKind::Other, Expect::Delete, 1, Access::Write),
        Request::Arith(_) => forward(OpKind::Other, Expect::Arith, 1, Access::Write),
        Request::Touch(_) => forward(OpKind::Other, Expect::Touch, 1, Access::Write),
        Request::FlushAll(_) => forward(OpKind::Other, Expect::Ok, 0, Access::Broadcast),
        Request::Meta(meta) => {
            let (op, access) = match meta.cmd {
                MetaCmd::Noop => return Class::Local(Local::MetaNoop),
                MetaCmd::Get if meta.has_flag(b'c') => (OpKind::Get, Access::ReadCas),
                MetaCmd::Get => (OpKind::Get, Access::Read),
                MetaCmd::Debug => (OpKind::Other, Access::Read),
                MetaCmd::Set | MetaCmd::Delete | MetaCmd::Arith => {
                    let op = match meta.cmd {
                        MetaCmd::Set => OpKind::Set,
                        _ => OpKind::Other,
                    };
                    // A compare, or a CAS token in the reply, is the key's primary's.
                    if meta.has_flag(b'C') || meta.has_flag(b'c') {
                        (op, Access::WriteCas)
                    } else {
                        (op, Access::Write)
                    }
                }
            };
            match forward(op, Expect::Meta, 1, access) {
                Class::Forward(f) => Class::Forward(Forward {
                    quiet: meta.quiet.then_some(meta.cmd),
                    ..f
                }),
                local => local,
            }
        }
        Request::Stats([]) => Class::Local(Local::Stats),
        Request::Stats(_) => Class::Local(Local::StatsUnsupported),
        Request::Version => Class::Local(Local::Version),
        Request::Verbosity { noreply } => Class::Local(Local::Verbosity { noreply: *noreply }),
        Request::Quit => Class::Local(Local::Quit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachelab_protocol::RequestError;

    #[test]
    fn a_binary_request_is_recognised_and_answered_in_binary() {
        let mut d = Decoder::default();
        let get = [
            0x80, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef,
        ];
        assert!(matches!(d.step(&get, &Limits::default()), Step::Binary));
        let reply = binary_error(&get);
        assert_eq!(&reply[..2], &[0x81, 0x00]);
        assert_eq!(&reply[6..8], &[0x00, 0x81]); // unknown command
        assert_eq!(&reply[12..16], &[0xde, 0xad, 0xbe, 0xef]); // opaque echoed
        let body = u32::from_be_bytes(reply[8..12].try_into().unwrap()) as usize;
        assert_eq!(reply.len(), 24 + body);
    }

    fn steps(input: &[u8]) -> Vec<Step> {
        let mut decoder = Decoder::default();
        let limits = Limits {
            max_value_len: 8,
            ..Limits::default()
        };
        let mut pos = 0;
        let mut out = Vec::new();
        loop {
            let step = decoder.step(&input[pos..], &limits);
            let advance = match &step {
                Step::Incomplete | Step::Binary => None,
                Step::Skipped(n) => Some(*n),
                Step::Reject(Invalid { consumed: len, .. }) | Step::Request { len, .. } => {
                    Some(*len)
                }
            };
            out.push(step);
            match advance {
                Some(n) => pos += n,
                None => return out,
            }
        }
    }

    #[test]
    fn gets_are_reads_and_sets_are_replicated() {
        let s = steps(b"get a b\r\nset k 0 0 1 noreply\r\nx\r\n");
        let Step::Request {
            class: Class::Forward(get),
            spans,
            ..
        } = &s[0]
        else {
            panic!()
        };
        // the keys are where the decoder found them, for routing and composition
        assert_eq!(spans.keys(b"get a b\r\n").collect::<Vec<_>>(), [b"a", b"b"]);
        assert_eq!(
            (get.op, get.keys, get.access),
            (OpKind::MultiGet, 2, Access::Read)
        );
        let Step::Request {
            class: Class::Forward(set),
            spans,
            ..
        } = &s[1]
        else {
            panic!()
        };
        assert_eq!(
            (set.op, set.access, set.noreply),
            (OpKind::Set, Access::Write, true)
        );
        assert!(spans.is_empty(), "one key: routing reads it from the frame");
    }

    #[test]
    fn a_value_over_the_limit_is_rejected_and_its_data_skipped() {
        let s = steps(b"set k 0 0 10\r\n0123456789\r\nversion\r\n");
        let Step::Reject(invalid) = &s[0] else {
            panic!("{s:?}")
        };
        assert_eq!(
            (invalid.consumed, invalid.error),
            (14, RequestError::ValueTooLarge)
        );
        assert_eq!(
            s[1..3],
            [
                Step::Skipped(12),
                Step::Request {
                    len: 9,
                    class: Class::Local(Local::Version),
                    spans: KeySpans::default(),
                },
            ]
        );
    }

    #[test]
    fn an_http_request_line_ends_the_decoding_as_memcached_closes() {
        let s = steps(b"GET / HTTP/1.1\r\nversion\r\n");
        let Step::Reject(invalid) = &s[0] else {
            panic!("{s:?}")
        };
        assert_eq!((invalid.then, invalid.reply()), (Discard::Close, None));
        assert_eq!(s[1..], [Step::Incomplete]);
    }

    #[test]
    fn a_storage_line_memcached_refuses_leaves_its_block_to_be_read_as_a_command() {
        let s = steps(b"set k x 0 7\r\nversion\r\n");
        assert!(matches!(
            s[0],
            Step::Reject(Invalid {
                error: RequestError::BadFlags,
                ..
            })
        ));
        assert_eq!(
            s[1],
            Step::Request {
                len: 9,
                class: Class::Local(Local::Version),
                spans: KeySpans::default(),
            }
        );
    }

    #[test]
    fn a_discard_spans_reads() {
        let mut decoder = Decoder::default();
        let limits = Limits {
            max_value_len: 4,
            ..Limits::default()
        };
        assert!(matches!(
            decoder.step(b"set k 0 0 6\r\n", &limits),
            Step::Reject { .. }
        ));
        assert_eq!(decoder.step(b"abc", &limits), Step::Skipped(3));
        assert!(decoder.is_discarding());
        assert_eq!(decoder.step(b"", &limits), Step::Incomplete);
        assert_eq!(decoder.step(b"def\r\nquit\r\n", &limits), Step::Skipped(5));
        assert!(!decoder.is_discarding());
    }

    #[test]
    fn local_commands_are_answered_by_the_net_layer() {
        let s = steps(b"stats\r\nstats slabs\r\nversion\r\nquit\r\n");
        let classes: Vec<Class> = s
            .iter()
            .filter_map(|s| match s {
                Step::Request { class, .. } => Some(*class),
                _ => None,
            })
            .collect();
        assert_eq!(
            classes,
            vec![
                Class::Local(Local::Stats),
                Class::Local(Local::StatsUnsupported),
                Class::Local(Local::Version),
                Class::Local(Local::Quit)
            ]
        );
    }

    #[test]
    fn requests_fed_one_byte_at_a_time_decode_as_fed_at_once() {
        let mut long = b"get ".to_vec();
        long.extend(std::iter::repeat_n(b'k', 70 * 1024));
        long.extend_from_slice(b"\r\nget a\r\n");
        let inputs: [&[u8]; 4] = [
            b"get a b\r\nset k 0 0 3\r\nabc\r\nbogus\r\ndelete k\r\n",
            b"set k 0 0 100\r\nxx\r\nget a\r\n",
            b"get a\nget b\r\n",
            &long,
        ];
        for input in inputs {
            let whole = steps(input);
            let mut decoder = Decoder::default();
            let limits = Limits {
                max_value_len: 8,
                ..Limits::default()
            };
            let (mut pos, mut held) = (0, 0);
            let mut fed = Vec::new();
            while held < input.len() {
                held += 1;
                loop {
                    let step = decoder.step(&input[pos..held], &limits);
                    match &step {
                        Step::Incomplete | Step::Binary => break,
                        Step::Skipped(n) => pos += *n,
                        Step::Reject(Invalid { consumed: n, .. })
                        | Step::Request { len: n, .. } => pos += *n,
                    }
                    fed.push(step);
                }
            }
            // A discard spans reads in pieces of what arrived; the rest must be equal.
            let kept = |s: &Step| !matches!(s, Step::Incomplete | Step::Skipped(_));
            let whole: Vec<Step> = whole.into_iter().filter(kept).collect();
            let fed: Vec<Step> = fed.into_iter().filter(kept).collect();
            assert_eq!(fed.len(), whole.len());
            for (a, b) in fed.iter().zip(&whole) {
                assert_eq!(format!("{a:?}"), format!("{b:?}"));
            }
        }
    }
}
