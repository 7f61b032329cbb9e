//! Property tests for the request parser: round trips, partial input at every byte
//! boundary, and arbitrary bytes (the fuzz target: no panic, always progress).

use cachelab_protocol::{
    parse_request, parse_request_to, Arith, ArithOp, Delete, Discard, FlushAll, Get, Keys, Limits,
    ParseError, Request, Store, StoreOp, Touch,
};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(prop_oneof![0x21u8..0x7f, 0x80u8..=0xff], 1..=250)
}

fn short_key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0x21u8..0x7f, 1..12)
}

/// memcached reads an expiration time as a 32-bit number.
fn exptime() -> impl Strategy<Value = i64> {
    any::<i32>().prop_map(i64::from)
}

/// An owned description of a valid request, turned into a borrowed `Request` for testing.
#[derive(Debug, Clone)]
enum Owned {
    Get(Vec<Vec<u8>>, bool),
    Store(StoreOp, Vec<u8>, u32, i64, Vec<u8>, Option<u64>, bool),
    Delete(Vec<u8>, bool),
    Arith(ArithOp, Vec<u8>, u64, bool),
    Touch(Vec<u8>, i64, bool),
    FlushAll(Option<i64>, bool),
    Version,
    Quit,
}

fn owned_request() -> impl Strategy<Value = Owned> {
    let store_op = prop_oneof![
        Just(StoreOp::Set),
        Just(StoreOp::Add),
        Just(StoreOp::Replace),
        Just(StoreOp::Append),
        Just(StoreOp::Prepend),
        Just(StoreOp::Cas),
    ];
    prop_oneof![
        (proptest::collection::vec(short_key(), 1..10), any::<bool>())
            .prop_map(|(k, cas)| Owned::Get(k, cas)),
        (key(), any::<bool>()).prop_map(|(k, cas)| Owned::Get(vec![k], cas)),
        (
            store_op,
            key(),
            any::<u32>(),
            exptime(),
            proptest::collection::vec(any::<u8>(), 0..300),
            any::<u64>(),
            any::<bool>()
        )
            .prop_map(|(op, k, f, e, d, cas, nr)| {
                let cas = (op == StoreOp::Cas).then_some(cas);
                Owned::Store(op, k, f, e, d, cas, nr)
            }),
        (key(), any::<bool>()).prop_map(|(k, nr)| Owned::Delete(k, nr)),
        (
            prop_oneof![Just(ArithOp::Incr), Just(ArithOp::Decr)],
            key(),
            any::<u64>(),
            any::<bool>()
        )
            .prop_map(|(op, k, d, nr)| Owned::Arith(op, k, d, nr)),
        (key(), exptime(), any::<bool>()).prop_map(|(k, e, nr)| Owned::Touch(k, e, nr)),
        (proptest::option::of(exptime()), any::<bool>()).prop_map(|(d, nr)| Owned::FlushAll(d, nr)),
        Just(Owned::Version),
        Just(Owned::Quit),
    ]
}

/// Composes the request and returns its bytes and the request parsed back, compared in
/// the test body through a borrowed view of the owned parts.
fn with_request<R>(owned: &Owned, f: impl FnOnce(Request<'_>) -> R) -> R {
    let joined;
    match owned {
        Owned::Get(keys, cas) => {
            joined = keys.join(&b' ');
            f(Request::Get(Get {
                keys: Keys::from_raw(&joined),
                cas: *cas,
            }))
        }
        Owned::Store(op, key, flags, exptime, data, cas_unique, noreply) => {
            f(Request::Store(Store {
                op: *op,
                key,
                flags: *flags,
                exptime: *exptime,
                data,
                cas_unique: *cas_unique,
                noreply: *noreply,
            }))
        }
        Owned::Delete(key, noreply) => f(Request::Delete(Delete {
            key,
            noreply: *noreply,
        })),
        Owned::Arith(op, key, delta, noreply) => f(Request::Arith(Arith {
            op: *op,
            key,
            delta: *delta,
            noreply: *noreply,
        })),
        Owned::Touch(key, exptime, noreply) => f(Request::Touch(Touch {
            key,
            exptime: *exptime,
            noreply: *noreply,
        })),
        Owned::FlushAll(delay, noreply) => f(Request::FlushAll(FlushAll {
            delay: *delay,
            noreply: *noreply,
        })),
        Owned::Version => f(Request::Version),
        Owned::Quit => f(Request::Quit),
    }
}

fn composed(owned: &Owned) -> Vec<u8> {
    with_request(owned, |r| {
        let mut out = Vec::new();
        r.compose(&mut out);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_of_compose_is_identity(owned in owned_request()) {
        let bytes = composed(&owned);
        with_request(&owned, |expected| {
            let parsed = parse_request(&bytes, &Limits::default());
            prop_assert_eq!(parsed, Ok((expected, bytes.len())));
            Ok(())
        })?;
    }

    #[test]
    fn every_strict_prefix_is_incomplete(owned in owned_request()) {
        let bytes = composed(&owned);
        for cut in 0..bytes.len() {
            prop_assert_eq!(
                parse_request(&bytes[..cut], &Limits::default()),
                Err(ParseError::Incomplete),
                "cut at {} of {:?}", cut, String::from_utf8_lossy(&bytes)
            );
        }
    }

    #[test]
    fn pipelined_requests_parse_one_after_another(
        reqs in proptest::collection::vec(owned_request(), 1..6)
    ) {
        let mut bytes = Vec::new();
        for r in &reqs {
            bytes.extend(composed(r));
        }
        let mut pos = 0;
        for r in &reqs {
            let expected_len = composed(r).len();
            let (_, used) = parse_request(&bytes[pos..], &Limits::default())
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(used, expected_len);
            pos += used;
        }
        prop_assert_eq!(pos, bytes.len());
    }

    /// The fuzz target: arbitrary bytes, biased towards protocol-looking input, never
    /// panic, and every answer other than "incomplete" consumes at least one byte and no
    /// more than the buffer holds (so a connection loop always makes progress).
    #[test]
    fn arbitrary_bytes_never_panic_and_always_make_progress(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..512),
            proptest::collection::vec(
                prop_oneof![
                    Just(b"get ".to_vec()), Just(b"set ".to_vec()), Just(b"cas ".to_vec()),
                    Just(b"incr ".to_vec()), Just(b"\r\n".to_vec()), Just(b"\n".to_vec()),
                    Just(b" ".to_vec()), Just(b"0 ".to_vec()), Just(b"5 ".to_vec()),
                    Just(b"noreply".to_vec()), Just(b"-1 ".to_vec()), Just(b"k".to_vec()),
                    Just(b"99999999999999999999 ".to_vec()),
                    Just(b"HTTP/1.1".to_vec()), Just(b"verbosity ".to_vec()),
                    Just(b"delete ".to_vec()), Just(b"stats ".to_vec()),
                ],
                0..40
            ).prop_map(|parts| parts.concat()),
        ],
        max_line in 8usize..128,
        max_value in 0usize..64,
    ) {
        let limits = Limits { max_key_len: 250, max_value_len: max_value, max_line_len: max_line };
        let mut rest: &[u8] = &bytes;
        let mut steps = 0;
        loop {
            steps += 1;
            prop_assert!(steps <= bytes.len() + 1);
            let parsed = parse_request(rest, &limits);
            // A caller that found the first newline already gets the same answer.
            if let Some(newline) = memchr::memchr(b'\n', rest) {
                let told = parse_request_to(rest, newline, &limits);
                prop_assert_eq!(format!("{told:?}"), format!("{parsed:?}"));
            }
            match parsed {
                Ok((_, used)) => {
                    prop_assert!(used > 0 && used <= rest.len());
                    rest = &rest[used..];
                }
                Err(ParseError::Invalid(inv)) => {
                    prop_assert!(inv.consumed > 0 && inv.consumed <= rest.len());
                    rest = &rest[inv.consumed..];
                    match inv.then {
                        Discard::Nothing => {}
                        Discard::Bytes(n) => {
                            let n = usize::try_from(n).unwrap_or(usize::MAX).min(rest.len());
                            rest = &rest[n..];
                        }
                        Discard::ThroughNewline => {
                            match memchr::memchr(b'\n', rest) {
                                Some(i) => rest = &rest[i + 1..],
                                None => rest = &[],
                            }
                        }
                        Discard::Close => break,
                    }
                }
                Err(ParseError::Incomplete) => break,
            }
        }
    }
}
