//! Property tests for the RESP2 parser: composed replies and commands read back
//! unchanged, every strict prefix of a reply asks for more bytes, and arbitrary bytes
//! never panic and always make progress.

use cachelab_protocol::resp::{compose_get, compose_mget, compose_resp_value, compose_set};
use cachelab_protocol::{parse_resp_reply, ReplyError, RespReply, RespValue};
use proptest::prelude::*;

fn line_text() -> impl Strategy<Value = Vec<u8>> {
    // Simple strings and errors cannot hold \r or \n.
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..40,
    )
}

fn resp_value() -> impl Strategy<Value = RespValue> {
    let leaf = prop_oneof![
        line_text().prop_map(RespValue::Simple),
        line_text().prop_map(RespValue::Error),
        any::<i64>().prop_map(RespValue::Integer),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100))
            .prop_map(RespValue::Bulk),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        proptest::option::of(proptest::collection::vec(inner, 0..8)).prop_map(RespValue::Array)
    })
}

fn composed(value: &RespValue) -> Vec<u8> {
    let mut out = Vec::new();
    compose_resp_value(&mut out, value);
    out
}

proptest! {
    #[test]
    fn parse_of_compose_is_the_identity(value in resp_value()) {
        let bytes = composed(&value);
        let (reply, used) = parse_resp_reply(&bytes).unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(reply.to_value(), value);
    }

    #[test]
    fn every_strict_prefix_of_a_reply_is_incomplete(value in resp_value()) {
        let bytes = composed(&value);
        for cut in 0..bytes.len() {
            prop_assert_eq!(parse_resp_reply(&bytes[..cut]), Err(ReplyError::Incomplete), "cut at {}", cut);
        }
    }

    #[test]
    fn commands_read_back_as_arrays_of_their_arguments(
        key in proptest::collection::vec(any::<u8>(), 1..50),
        value in proptest::collection::vec(any::<u8>(), 0..200),
        keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..20), 1..10),
    ) {
        let bulks = |args: Vec<Vec<u8>>| RespValue::Array(Some(args.into_iter().map(|a| RespValue::Bulk(Some(a))).collect()));
        let mut out = Vec::new();
        compose_set(&mut out, &key, &value);
        let (reply, used) = parse_resp_reply(&out).unwrap();
        prop_assert_eq!(used, out.len());
        prop_assert_eq!(reply.to_value(), bulks(vec![b"SET".to_vec(), key.clone(), value]));

        out.clear();
        compose_get(&mut out, &key);
        prop_assert_eq!(parse_resp_reply(&out).unwrap().0.to_value(), bulks(vec![b"GET".to_vec(), key]));

        out.clear();
        compose_mget(&mut out, keys.iter().map(Vec::as_slice));
        let mut expected = vec![b"MGET".to_vec()];
        expected.extend(keys);
        prop_assert_eq!(parse_resp_reply(&out).unwrap().0.to_value(), bulks(expected));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_always_progress(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            proptest::collection::vec(
                prop_oneof![
                    Just(b"+OK\r\n".to_vec()), Just(b"$".to_vec()), Just(b"*".to_vec()),
                    Just(b":".to_vec()), Just(b"-".to_vec()), Just(b"\r\n".to_vec()),
                    Just(b"\n".to_vec()), Just(b"-1".to_vec()), Just(b"3".to_vec()),
                    Just(b"99999999999999999999".to_vec()), Just(b"abc".to_vec()),
                ],
                0..40
            ).prop_map(|parts| parts.concat()),
        ],
    ) {
        let mut rest: &[u8] = &bytes;
        while let Ok((reply, used)) = parse_resp_reply(rest) {
            prop_assert!(used > 0 && used <= rest.len());
            if let RespReply::Array(Some(elements)) = reply {
                prop_assert_eq!(elements.iter().count(), elements.len());
                let nulls = elements.iter().filter(|e| e.is_null()).count();
                prop_assert_eq!(nulls, elements.nulls());
            }
            rest = &rest[used..];
        }
    }
}
