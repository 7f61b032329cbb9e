use proptest::prelude::*;

use super::*;
use crate::resp::{compose_resp_value, parse_resp_reply, RespValue};

/// Feeds `bytes` in pieces of `step` bytes; the length found, checking that no
/// earlier piece claimed the end.
fn framed_in_pieces(
    bytes: &[u8],
    expect: Expect,
    step: usize,
) -> (Result<usize, ReplyError>, ReplyScan) {
    let mut scan = ReplyScan::new(expect);
    let mut held = 0;
    loop {
        held = (held + step).min(bytes.len());
        match scan.advance(&bytes[..held]) {
            Ok(Some(len)) => return (Ok(len), scan),
            Ok(None) if held == bytes.len() => return (Err(ReplyError::Incomplete), scan),
            Ok(None) => {}
            Err(e) => return (Err(e), scan),
        }
    }
}

/// Feeds `bytes` in pieces of `step`, dropping what the scan no longer needs after each;
/// the total length found. The most held at once goes to `peak`.
fn skipped_in_pieces(
    bytes: &[u8],
    expect: Expect,
    step: usize,
    peak: &mut usize,
) -> Result<usize, ReplyError> {
    let mut scan = ReplyScan::new(expect);
    let mut held: Vec<u8> = Vec::new();
    let (mut fed, mut dropped) = (0, 0);
    while fed < bytes.len() {
        let next = (fed + step).min(bytes.len());
        held.extend_from_slice(&bytes[fed..next]);
        fed = next;
        *peak = (*peak).max(held.len());
        if let Some(len) = scan.advance(&held)? {
            return Ok(dropped + len);
        }
        let n = scan.discardable(&held);
        held.drain(..n);
        scan.discard(n);
        dropped += n;
    }
    Err(ReplyError::Incomplete)
}

fn composed(value: &RespValue) -> Vec<u8> {
    let mut out = Vec::new();
    compose_resp_value(&mut out, value);
    out
}

fn bulks(n: usize) -> Vec<u8> {
    let elements = (0..n)
        .map(|i| {
            RespValue::Bulk(if i % 3 == 0 {
                None
            } else {
                Some(b"abc".to_vec())
            })
        })
        .collect();
    composed(&RespValue::Array(Some(elements)))
}

fn nested(depth: usize) -> Vec<u8> {
    let mut value = RespValue::Integer(7);
    for _ in 0..depth {
        value = RespValue::Array(Some(vec![value, RespValue::Bulk(None)]));
    }
    composed(&value)
}

#[test]
fn a_reply_read_one_byte_at_a_time_looks_at_each_byte_once() {
    let bytes = bulks(20_000);
    let (len, scan) = framed_in_pieces(&bytes, Expect::Resp, 1);
    assert_eq!(len, Ok(bytes.len()));
    assert!(
        scan.examined() <= bytes.len() as u64,
        "{} of {}",
        scan.examined(),
        bytes.len()
    );

    let mut values = Vec::new();
    for i in 0..5_000 {
        values.extend_from_slice(format!("VALUE key{i} 0 3\r\nabc\r\n").as_bytes());
    }
    values.extend_from_slice(b"END\r\n");
    let (len, scan) = framed_in_pieces(&values, Expect::Values, 1);
    assert_eq!(len, Ok(values.len()));
    assert!(scan.examined() <= values.len() as u64);
}

#[test]
fn the_summary_counts_an_mget_s_nulls_at_the_top_level_only() {
    let bytes = bulks(10);
    assert_eq!(
        parse_reply(&bytes, Expect::Resp),
        Ok((
            Reply::Resp(RespKind::Array {
                len: 10,
                nulls: 4,
                null: false
            }),
            bytes.len()
        ))
    );
    let bytes = nested(3);
    assert_eq!(
        parse_reply(&bytes, Expect::Resp),
        Ok((
            Reply::Resp(RespKind::Array {
                len: 2,
                nulls: 1,
                null: false
            }),
            bytes.len()
        ))
    );
}

#[test]
fn redis_replies_past_the_tree_parser_s_limits_are_framed() {
    // Redis sends these (a script's deep table, a long status line); a proxy relays them.
    let deep = nested(200);
    assert!(parse_resp_reply(&deep).is_err());
    assert_eq!(
        parse_reply(&deep, Expect::Resp).map(|(_, len)| len),
        Ok(deep.len())
    );

    let mut long = b"+".to_vec();
    long.extend(std::iter::repeat_n(b'x', 200 * 1024));
    long.extend_from_slice(b"\r\n");
    assert_eq!(
        parse_reply(&long, Expect::Resp),
        Ok((Reply::Resp(RespKind::Simple), long.len()))
    );
}

#[test]
fn a_reply_read_past_holds_only_what_a_line_needs() {
    let mut long = b"-ERR ".to_vec();
    long.extend(std::iter::repeat_n(b'y', 100_000));
    long.extend_from_slice(b"\r\n");
    let mut bulk = b"$300000\r\n".to_vec();
    bulk.extend(std::iter::repeat_n(b'z', 300_000));
    bulk.extend_from_slice(b"\r\n");
    let mut values = Vec::new();
    for i in 0..3 {
        values.extend_from_slice(format!("VALUE k{i} 0 100000\r\n").as_bytes());
        values.extend(std::iter::repeat_n(b'v', 100_000));
        values.extend_from_slice(b"\r\n");
    }
    values.extend_from_slice(b"END\r\n");
    for (bytes, expect) in [
        (long, Expect::Resp),
        (bulk, Expect::Resp),
        (bulks(3000), Expect::Resp),
        (nested(100), Expect::Resp),
        (values, Expect::Values),
    ] {
        let mut peak = 0;
        assert_eq!(
            skipped_in_pieces(&bytes, expect, 1000, &mut peak),
            Ok(bytes.len())
        );
        assert!(
            peak < 1100,
            "held {peak} bytes of a {}-byte reply",
            bytes.len()
        );
    }
}

#[test]
fn bytes_that_cannot_be_the_reply_are_malformed() {
    for (bytes, expect) in [
        (&b"?what\r\n"[..], Expect::Resp),
        (b"$abc\r\n", Expect::Resp),
        (b"$-2\r\n", Expect::Resp),
        (b"+OK\n", Expect::Resp),
        (b"$2\r\nabXY", Expect::Resp),
        (b":12x\r\n", Expect::Resp),
        (b"VALUE k 0 3\r\nabcXY", Expect::Values),
        (b"STORED\n", Expect::Store),
        (b"VA x\r\n", Expect::Meta),
    ] {
        assert!(
            matches!(
                framed_in_pieces(bytes, expect, 1).0,
                Err(ReplyError::Malformed(_))
            ),
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    // A number's line cannot be longer than a number.
    let mut header = b"*".to_vec();
    header.extend(std::iter::repeat_n(b'1', 100));
    assert!(matches!(
        framed_in_pieces(&header, Expect::Resp, 7).0,
        Err(ReplyError::Malformed(_))
    ));
    let line = vec![b'V'; MAX_REPLY_LINE + 10];
    assert!(matches!(
        framed_in_pieces(&line, Expect::Values, 100).0,
        Err(ReplyError::Malformed(_))
    ));
}

#[test]
fn memcached_replies_end_where_the_parser_says() {
    let cases: [(&[u8], Expect); 8] = [
        (
            b"VALUE a 1 2 9\r\nhi\r\nVALUE b 0 0\r\n\r\nEND\r\n",
            Expect::Values,
        ),
        (b"END\r\n", Expect::Values),
        (b"SERVER_ERROR out of memory\r\n", Expect::Values),
        (b"STAT pid 1\r\nSTAT uptime 2\r\nEND\r\n", Expect::Stats),
        (b"VA 3 f1\r\nabc\r\n", Expect::Meta),
        (b"HD c12\r\n", Expect::Meta),
        (b"STORED\r\n", Expect::Store),
        (b"42\r\n", Expect::Arith),
    ];
    for (bytes, expect) in cases {
        let (len, scan) = framed_in_pieces(bytes, expect, 1);
        let (reply, whole) = parse_reply(bytes, expect).unwrap();
        assert_eq!(len, Ok(whole));
        assert_eq!(scan.reply(bytes), Ok(reply));
    }
}

fn line_text() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..30,
    )
}

fn resp_value() -> impl Strategy<Value = RespValue> {
    let leaf = prop_oneof![
        line_text().prop_map(RespValue::Simple),
        line_text().prop_map(RespValue::Error),
        any::<i64>().prop_map(RespValue::Integer),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..60))
            .prop_map(RespValue::Bulk),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        proptest::option::of(proptest::collection::vec(inner, 0..8)).prop_map(RespValue::Array)
    })
}

proptest! {
    #[test]
    fn read_in_any_pieces_a_reply_frames_as_the_tree_parser_reads_it(
        value in resp_value(),
        step in 1usize..40,
        tail in proptest::collection::vec(any::<u8>(), 0..10),
    ) {
        let bytes = composed(&value);
        let (tree, len) = parse_resp_reply(&bytes).unwrap();
        let mut stream = bytes.clone();
        stream.extend_from_slice(&tail);
        let (found, scan) = framed_in_pieces(&stream, Expect::Resp, step);
        prop_assert_eq!(found, Ok(len));
        prop_assert_eq!(scan.resp_kind(), Some(RespKind::of(&tree)));
        let mut peak = 0;
        prop_assert_eq!(skipped_in_pieces(&stream, Expect::Resp, step, &mut peak), Ok(len));
    }

    #[test]
    fn arbitrary_bytes_frame_as_the_whole_buffer_parses(
        bytes in proptest::collection::vec(prop_oneof![
            Just(b'\r'), Just(b'\n'), Just(b'$'), Just(b'*'), Just(b'-'), Just(b'1'), Just(b'0'),
            Just(b'+'), Just(b':'), any::<u8>()
        ], 0..60),
        step in 1usize..9,
    ) {
        // Within the tree parser's limits the two agree on where a reply ends, and on
        // whether the bytes can be one at all.
        let whole = parse_resp_reply(&bytes).map(|(_, len)| len);
        let (found, _) = framed_in_pieces(&bytes, Expect::Resp, step);
        match whole {
            Ok(len) => prop_assert_eq!(found, Ok(len)),
            // The scan may call bytes malformed sooner (a bad type byte before its line
            // ends), but only bytes the tree parser refuses once the line ends.
            Err(ReplyError::Incomplete) => {
                let ended = [&bytes[..], b"\r\n"].concat();
                let refused = matches!(parse_resp_reply(&ended), Err(ReplyError::Malformed(_)));
                prop_assert!(found == Err(ReplyError::Incomplete) || refused, "{:?}", found);
            }
            Err(ReplyError::Malformed(_)) => prop_assert!(matches!(found, Err(ReplyError::Malformed(_)))),
        }
    }
}

fn values_reply() -> impl Strategy<Value = Vec<u8>> {
    let value = (
        proptest::collection::vec(b'a'..=b'z', 1..12),
        any::<u32>(),
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::option::of(any::<u64>()),
    );
    proptest::collection::vec(value, 0..5).prop_map(|values| {
        let mut out = Vec::new();
        for (key, flags, data, cas) in values {
            out.extend_from_slice(b"VALUE ");
            out.extend_from_slice(&key);
            out.extend_from_slice(format!(" {flags} {}", data.len()).as_bytes());
            if let Some(cas) = cas {
                out.extend_from_slice(format!(" {cas}").as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&data);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"END\r\n");
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// A retrieval reply summarised while it is framed is the one the parser gives.
    #[test]
    fn a_framed_retrieval_reply_is_the_parsed_one(bytes in values_reply(), step in 1usize..64) {
        let (len, scan) = framed_in_pieces(&bytes, Expect::Values, step);
        let (reply, whole) = parse_reply(&bytes, Expect::Values).unwrap();
        prop_assert_eq!(len, Ok(whole));
        prop_assert_eq!(scan.reply(&bytes), Ok(reply));
    }
}

#[test]
fn a_retrieval_reply_read_past_is_not_summarised_from_moved_positions() {
    let bytes = b"VALUE a 0 3\r\nabc\r\nEND\r\n";
    let mut scan = ReplyScan::new(Expect::Values);
    assert_eq!(scan.advance(&bytes[..15]), Ok(None));
    let n = scan.discardable(&bytes[..15]);
    assert!(n > 0);
    scan.discard(n);
    assert_eq!(scan.advance(&bytes[n..]), Ok(Some(bytes.len() - n)));
    // What is left is no longer a whole reply: the summary is not taken for it.
    assert!(scan.reply(&bytes[n..]).is_err());
}
