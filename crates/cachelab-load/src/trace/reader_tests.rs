use std::io::Read;

use ruzstd::encoding::{compress_to_vec, CompressionLevel};

use super::*;
use crate::trace::csv::tests::TWITTER_SAMPLE;
use crate::trace::TraceOp;

fn read_all(bytes: Vec<u8>, options: ReadOptions) -> Result<Vec<Record>, TraceError> {
    open(Cursor::new(bytes), options)?.collect()
}

fn error(bytes: &[u8], options: ReadOptions) -> String {
    read_all(bytes.to_vec(), options).unwrap_err().to_string()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    compress_to_vec(bytes, CompressionLevel::Fastest)
}

#[test]
fn twitters_sample_reads_with_times_from_its_start() {
    let records = read_all(TWITTER_SAMPLE.into(), ReadOptions::default()).unwrap();
    let times: Vec<u64> = records.iter().map(|r| r.time_ns).collect();
    assert_eq!(times, [0, 0, 1_000_000_000, 1_000_000_000, 2_000_000_000]);
    let lines: Vec<u64> = records.iter().map(|r| r.line).collect();
    assert_eq!(lines, [1, 2, 3, 4, 5]);
}

#[test]
fn zstd_compressed_traces_read_as_the_plain_one_even_in_several_frames() {
    let plain = read_all(TWITTER_SAMPLE.into(), ReadOptions::default()).unwrap();
    let one = read_all(zstd(TWITTER_SAMPLE.as_bytes()), ReadOptions::default()).unwrap();
    assert_eq!(one, plain);
    let (a, b) = TWITTER_SAMPLE.split_at(TWITTER_SAMPLE.find("1,CX").unwrap());
    let mut two = zstd(a.as_bytes());
    two.extend(zstd(b.as_bytes()));
    assert_eq!(read_all(two, ReadOptions::default()).unwrap(), plain);
}

#[test]
fn a_truncated_zstd_frame_is_refused() {
    let whole = zstd(TWITTER_SAMPLE.repeat(50).as_bytes());
    let cut = &whole[..whole.len() - 10];
    let err = error(cut, ReadOptions::default());
    assert!(err.starts_with("trace line "), "{err}");
    assert!(
        err.contains("cannot decompress") || err.contains("truncated"),
        "{err}"
    );
}

#[test]
fn a_plain_file_cut_inside_a_line_is_refused() {
    let cut = &TWITTER_SAMPLE[..TWITTER_SAMPLE.len() - 3];
    assert_eq!(
        error(cut.as_bytes(), ReadOptions::default()),
        "trace line 5: the file ends inside a line (truncated?)"
    );
}

#[test]
fn a_line_over_the_bound_is_refused() {
    let options = ReadOptions {
        max_line: 64,
        ..ReadOptions::default()
    };
    let long = format!("0,{},1,1,1,get,0\n", "k".repeat(100));
    assert_eq!(
        error(long.as_bytes(), options),
        "trace line 1: a line longer than 64 bytes"
    );
}

/// 256 MiB of one byte, no newline, compressed to a few kilobytes: the reader stops at
/// the line bound (1 MiB) instead of expanding it.
#[test]
fn a_compressed_bomb_stops_at_the_line_bound() {
    let bomb = compress_to_vec(
        std::io::repeat(b'7').take(256 << 20),
        CompressionLevel::Fastest,
    );
    assert!(bomb.len() < 2 << 20, "{} bytes", bomb.len());
    let mut reader = open(Cursor::new(bomb), ReadOptions::default()).unwrap();
    let err = reader.next_record().unwrap_err();
    assert_eq!(
        err.to_string(),
        "trace line 1: a line longer than 1048576 bytes"
    );
    assert!(reader.buf.capacity() <= 2 * DEFAULT_MAX_LINE);
}

#[test]
fn times_may_go_back_within_the_tolerance_and_are_then_held() {
    let trace = "10.000,a,1,1,1,get,0\n10.020,b,1,1,1,get,0\n10.015,c,1,1,1,get,0\n";
    let records = read_all(trace.into(), ReadOptions::default()).unwrap();
    let times: Vec<u64> = records.iter().map(|r| r.time_ns).collect();
    assert_eq!(times, [0, 20_000_000, 20_000_000]);
    let back = "10.000,a,1,1,1,get,0\n10.5,b,1,1,1,get,0\n10.2,c,1,1,1,get,0\n";
    assert_eq!(
        error(back.as_bytes(), ReadOptions::default()),
        "trace line 3: time 10.200000000 is 300.000 ms before an earlier line's \
         (more than 10 ms backwards)"
    );
}

#[test]
fn bad_fields_are_refused_with_their_line() {
    let trace = "0,a,1,1,1,get,0\n\n0,b,1,1,1,touch,0\n";
    assert_eq!(
        error(trace.as_bytes(), ReadOptions::default()),
        "trace line 3: unknown operation 'touch'"
    );
    let trace = "0,a,1,1x,1,get,0\n";
    assert_eq!(
        error(trace.as_bytes(), ReadOptions::default()),
        "trace line 1: value size '1x' is not a number"
    );
    let trace = "0,a,1,999999999,1,set,0\n";
    assert_eq!(
        error(trace.as_bytes(), ReadOptions::default()),
        "trace line 1: value size 999999999 is over the bound of 67108864"
    );
}

#[test]
fn memcached_refuses_keys_over_250_bytes_and_text_keys_with_spaces() {
    let padded = "0,a,251,1,1,get,0\n";
    let memcached = ReadOptions::for_protocol(Protocol::MemcacheText);
    assert_eq!(
        error(padded.as_bytes(), memcached),
        "trace line 1: key of 251 bytes: memcached takes keys of at most 250"
    );
    let binary = ReadOptions::for_protocol(Protocol::MemcacheBinary);
    assert!(read_all(padded.into(), binary).is_err());
    assert!(read_all(padded.into(), ReadOptions::for_protocol(Protocol::Redis)).is_ok());
    let spaced = "0.1 [0 1.2.3.4:5] \"GET\" \"a b\"\n";
    assert_eq!(
        error(spaced.as_bytes(), memcached),
        "trace line 1: key has byte 0x20, which memcached's text protocol cannot carry in a key"
    );
    assert!(read_all(spaced.into(), binary).is_ok());
}

#[test]
fn monitor_output_is_told_from_csv_and_multi_key_commands_keep_their_order() {
    let trace = "OK\n\
        1339518083.107412 [0 127.0.0.1:60866] \"MGET\" \"a\" \"b\"\n\
        1339518083.207412 [0 lua] \"set\" \"c\" \"xyz\" \"EX\" \"5\"\n";
    let mut reader = open(
        Cursor::new(trace.as_bytes().to_vec()),
        ReadOptions::default(),
    )
    .unwrap();
    let records: Vec<Record> = reader.by_ref().map(Result::unwrap).collect();
    assert_eq!(reader.format(), Some(Format::Monitor));
    let got: Vec<(&[u8], TraceOp, u64, u64)> = records
        .iter()
        .map(|r| (r.key.as_slice(), r.op, r.time_ns, r.line))
        .collect();
    assert_eq!(
        got,
        [
            (&b"a"[..], TraceOp::Get, 0, 2),
            (b"b", TraceOp::Get, 0, 2),
            (b"c", TraceOp::Set, 100_000_000, 3),
        ]
    );
    assert_eq!((records[2].ttl, records[2].value_size), (5, 3));
    assert_ne!(records[0].client, records[2].client);
}

#[test]
fn reading_stops_after_the_first_error() {
    let trace = "0,a,1,1,1,nope,0\n0,b,1,1,1,get,0\n";
    let mut reader = open(
        Cursor::new(trace.as_bytes().to_vec()),
        ReadOptions::default(),
    )
    .unwrap();
    assert!(reader.next().unwrap().is_err());
    assert!(reader.next().is_none());
}

/// `zstd` 1.5's output (with its checksum) for two lines of our own CSV.
const ZSTD_CLI_TRACE: [u8; 50] = [
    0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x29, 0x2d, 0x01, 0x00, 0xf8, 0x30, 0x2e, 0x35, 0x2c, 0x6b, 0x31,
    0x2c, 0x32, 0x2c, 0x31, 0x30, 0x2c, 0x31, 0x2c, 0x73, 0x65, 0x74, 0x2c, 0x30, 0x0a, 0x31, 0x2e,
    0x32, 0x32, 0x2c, 0x67, 0x65, 0x74, 0x2c, 0x30, 0x0a, 0x01, 0x00, 0x71, 0x9b, 0x4d, 0x60, 0xa3,
    0x0f, 0x53,
];

#[test]
fn the_zstd_tools_output_reads_and_its_checksum_is_checked() {
    let records = read_all(ZSTD_CLI_TRACE.to_vec(), ReadOptions::default()).unwrap();
    let got: Vec<(u64, TraceOp, u64)> = records
        .iter()
        .map(|r| (r.time_ns, r.op, r.client))
        .collect();
    assert_eq!(got, [(0, TraceOp::Set, 1), (750_000_000, TraceOp::Get, 2)]);
    let mut damaged = ZSTD_CLI_TRACE;
    damaged[49] ^= 1;
    let err = error(&damaged, ReadOptions::default());
    assert!(err.contains("checksum mismatch"), "{err}");
}

#[test]
fn the_shipped_synthetic_trace_reads_whole_for_memcached() {
    let shipped = include_bytes!("../../../../experiments/traces/synthetic.csv");
    let options = ReadOptions::for_protocol(Protocol::MemcacheText);
    let records = read_all(shipped.to_vec(), options).unwrap();
    assert_eq!(records.len(), 4000);
    assert!(records.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    let span = records.last().unwrap().time_ns;
    assert!((9_000_000_000..11_000_000_000).contains(&span), "{span}");
}
