//! The RESP request parser on arbitrary bytes (the first two bytes choose the limits).
//! On every successful parse: progress within the buffer, the argument count within the
//! limit, and the command composed as an array parses back to the same arguments using
//! exactly the composed bytes. On every rejection: progress within the buffer. Fed in
//! pieces to a `RequestScan`, the request is ready exactly when the parser stops asking
//! for more. Never a panic.
#![no_main]

use cachelab_protocol::resp::{parse_command, RequestScan, RespLimits, RespParseError, Scan};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let limits = RespLimits {
        max_args: 1 + usize::from(data[0] % 16),
        max_bulk_len: usize::from(data[0]) * 4,
        max_inline_len: 8 + usize::from(data[1]) * 4,
    };
    let buf = &data[2..];
    let step = 1 + usize::from(data[1] % 8);
    let mut scan = RequestScan::default();
    let mut held = 0;
    while held < buf.len() {
        held = (held + step).min(buf.len());
        let ready = scan.advance(&buf[..held], &limits) == Scan::Ready;
        let whole = parse_command(&buf[..held], &limits);
        assert_eq!(ready, whole != Err(RespParseError::Incomplete));
        if ready {
            break;
        }
    }
    match parse_command(buf, &limits) {
        Ok((command, used)) => {
            assert!(used > 0 && used <= buf.len());
            assert!(command.is_inline() || command.args().len() <= limits.max_args);
            let mut composed = Vec::new();
            command.compose(&mut composed);
            let unlimited = RespLimits::default();
            let (again, again_used) = parse_command(&composed, &unlimited).unwrap();
            assert_eq!(again_used, composed.len());
            assert_eq!(again.args(), command.args());
        }
        Err(RespParseError::Incomplete) => {}
        Err(RespParseError::Invalid(invalid)) => {
            assert!(invalid.consumed > 0 && invalid.consumed <= buf.len());
        }
    }
});
