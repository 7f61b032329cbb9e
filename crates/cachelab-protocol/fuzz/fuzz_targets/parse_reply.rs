//! The reply parser on arbitrary bytes, for every kind of request (the first byte
//! chooses it). On every successful parse: progress within the buffer, the reply ends
//! with CRLF, a VALUE body ends right before `END\r\n`, the reply's own bytes parse alone
//! to the same reply, and one byte fewer is incomplete; the same bytes fed to a
//! `ReplyScan` in pieces (of a size the second byte chooses) end at the same place with
//! the same reply. Never a panic.
#![no_main]

use cachelab_protocol::{parse_reply, Expect, Reply, ReplyError, ReplyScan};
use libfuzzer_sys::fuzz_target;

const KINDS: [Expect; 10] = [
    Expect::Resp,
    Expect::Meta,
    Expect::Values,
    Expect::Store,
    Expect::Delete,
    Expect::Arith,
    Expect::Touch,
    Expect::Ok,
    Expect::Version,
    Expect::Stats,
];

fuzz_target!(|data: &[u8]| {
    let Some((&kind, buf)) = data.split_first() else {
        return;
    };
    let expect = KINDS[usize::from(kind) % KINDS.len()];
    let step = 1 + usize::from(buf.first().copied().unwrap_or(0) % 16);
    let mut scan = ReplyScan::new(expect);
    let mut scanned = None;
    let mut held = 0;
    while held < buf.len() {
        held = (held + step).min(buf.len());
        match scan.advance(&buf[..held]) {
            Ok(Some(len)) => {
                scanned = Some((scan.reply(&buf[..len]), len));
                break;
            }
            Ok(None) => {}
            Err(_) => break,
        }
    }
    if let Ok((reply, used)) = parse_reply(buf, expect) {
        assert_eq!(scanned, Some((Ok(reply), used)));
    }
    match parse_reply(buf, expect) {
        Ok((reply, used)) => {
            assert!(used >= 2 && used <= buf.len());
            assert_eq!(&buf[used - 2..used], b"\r\n");
            match reply {
                Reply::Values { body_len, .. } | Reply::Stats { body_len } => {
                    assert!(body_len <= used);
                    if !reply.is_error() {
                        assert_eq!(&buf[body_len..used], b"END\r\n", "{reply:?}");
                    }
                }
                _ => {}
            }
            assert_eq!(parse_reply(&buf[..used], expect), Ok((reply, used)));
            assert_eq!(parse_reply(&buf[..used - 1], expect), Err(ReplyError::Incomplete));
        }
        Err(ReplyError::Incomplete | ReplyError::Malformed(_)) => {}
    }
});
