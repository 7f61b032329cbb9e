//! The request parser on arbitrary bytes (the first two bytes choose the limits). On
//! every successful parse: progress within the buffer, keys within the limits, and the
//! request composed back parses to the same request using exactly the composed bytes.
//! On every rejection: progress within the buffer. Never a panic.
#![no_main]

use cachelab_protocol::{parse_request, Keys, Limits, ParseError, Request};
use libfuzzer_sys::fuzz_target;

fn keys_ok(keys: &Keys<'_>, limits: &Limits) -> bool {
    keys.iter()
        .all(|k| !k.is_empty() && k.len() <= limits.max_key_len && k.iter().all(|b| *b > b' ' && *b != 0x7f))
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let limits = Limits {
        max_key_len: 250,
        max_value_len: usize::from(data[0]) * 8,
        max_line_len: 16 + usize::from(data[1]) * 4,
    };
    let buf = &data[2..];
    match parse_request(buf, &limits) {
        Ok((request, used)) => {
            assert!(used > 0 && used <= buf.len());
            if let Request::Get(get) = &request {
                assert!(keys_ok(&get.keys, &limits), "{request:?}");
            }
            let mut composed = Vec::new();
            request.compose(&mut composed);
            let roomy = Limits { max_line_len: composed.len() + 2, ..limits };
            let (again, again_used) = parse_request(&composed, &roomy)
                .unwrap_or_else(|e| panic!("{request:?} composed as {composed:?}: {e:?}"));
            assert_eq!(again, request);
            assert_eq!(again_used, composed.len());
            // the request's own bytes parse alone to the same request
            let (alone, alone_used) = parse_request(&buf[..used], &limits).expect("prefix");
            assert_eq!((alone, alone_used), (request, used));
        }
        Err(ParseError::Invalid(invalid)) => {
            assert!(invalid.consumed > 0 && invalid.consumed <= buf.len() + 2);
        }
        Err(ParseError::Incomplete) => {}
    }
});
