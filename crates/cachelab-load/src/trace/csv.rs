//! twitter/cache-trace's CSV format: one request a line,
//! `timestamp,anonymized key,key size,value size,client id,operation,TTL`.
//!
//! The timestamp is in seconds: whole in Twitter's traces, fractional in ours (up to 9
//! decimals, nanoseconds). The key is everything between the first comma and the last five,
//! so a key with a comma in it still reads. No header line.

use std::io::Write;

use super::error::TraceErrorKind;
use super::{Record, TraceOp};

/// A line's fields; `time_ns` is the line's own time (since the epoch of its clock),
/// not yet made relative to the trace's start.
pub fn parse_line(line: &[u8], record: &mut Record) -> Result<(), TraceErrorKind> {
    let malformed = || {
        TraceErrorKind::Malformed(format!(
            "not 7 comma-separated fields (timestamp,key,key size,value size,client id,operation,TTL): '{}'",
            shown(line)
        ))
    };
    let first = memchr::memchr(b',', line).ok_or_else(malformed)?;
    let mut tail = [&b""[..]; 5];
    let mut end = line.len();
    for field in tail.iter_mut().rev() {
        let comma = memchr::memrchr(b',', &line[..end]).ok_or_else(malformed)?;
        if comma < first + 1 {
            return Err(malformed());
        }
        *field = &line[comma + 1..end];
        end = comma;
    }
    let [key_size, value_size, client, op, ttl] = tail;
    record.time_ns = parse_seconds(&line[..first]).ok_or_else(|| TraceErrorKind::NotANumber {
        field: "timestamp",
        value: shown(&line[..first]),
    })?;
    record.key.clear();
    record.key.extend_from_slice(&line[first + 1..end]);
    record.key_size = number(key_size, "key size")?;
    record.value_size = number(value_size, "value size")?;
    record.client = number(client, "client id")?;
    record.op = TraceOp::from_name(op).ok_or_else(|| TraceErrorKind::UnknownOp(shown(op)))?;
    record.ttl = number(ttl, "TTL")?;
    Ok(())
}

/// Writes `record` as one CSV line, its time in seconds with 6 decimals.
pub fn write_line(out: &mut impl Write, record: &Record) -> std::io::Result<()> {
    let (s, ns) = (
        record.time_ns / 1_000_000_000,
        record.time_ns % 1_000_000_000,
    );
    write!(out, "{s}.{:06},", ns / 1000)?;
    out.write_all(&record.key)?;
    writeln!(
        out,
        ",{},{},{},{},{}",
        record.key_size,
        record.value_size,
        record.client,
        record.op.name(),
        record.ttl
    )
}

/// Seconds, whole or with up to 9 decimals, as nanoseconds; more decimals are cut.
pub fn parse_seconds(text: &[u8]) -> Option<u64> {
    let (whole, fraction) = match memchr::memchr(b'.', text) {
        Some(dot) => (&text[..dot], &text[dot + 1..]),
        None => (text, &b""[..]),
    };
    if whole.is_empty() || !whole.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let seconds: u64 = std::str::from_utf8(whole).ok()?.parse().ok()?;
    let mut ns = 0u64;
    for i in 0..9 {
        ns = ns * 10 + fraction.get(i).map_or(0, |d| u64::from(d - b'0'));
    }
    seconds.checked_mul(1_000_000_000)?.checked_add(ns)
}

fn number<T: std::str::FromStr>(text: &[u8], field: &'static str) -> Result<T, TraceErrorKind> {
    std::str::from_utf8(text)
        .ok()
        .filter(|t| !t.starts_with('+'))
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| TraceErrorKind::NotANumber {
            field,
            value: shown(text),
        })
}

/// A field for a message: lossy UTF-8, cut to 60 bytes.
pub(super) fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(60)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if cut.len() < bytes.len() {
        s.push_str("...");
    }
    s
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// The first lines of twitter/cache-trace's `samples/2020Mar/cluster026`.
    pub const TWITTER_SAMPLE: &str = "\
0,y:46:7d:CXm4:5kyXBgWe.tekY.CJBeWJekU-CTpJ:CY.5kyXBgWe.tekY.CJBeWJekU-CTpJ-08J0G5iY00msm7J75i4Wdd4WJG7s6GJ7:5kyXBgWe/CJBeWJekU/5kyCyByC/tSBgW3p1B1WXWpy_EkYWv_SkvvkU_rvRCyWe_jeBmmxJ_kpW_YBT:48sLd7Lsdd.7d,201,2259,1,get,0
0,y:46:7d:CXm4:BYexBpJPWp.YWzWv.CyBmeRvWCCzJ:CY.BYexBpJPWp.YWzWv.CyBmeRvWCCzJ-6Jd0G08B65iY8JY8s8JL4dB48Y6JYJ4L:Cez/hyBmORvWChzJ/1WyrReeWpyORvWC/eWfRWCyC:48sLd7Lsdd.7d,164,0,2,get,0
1,CXmJ.(XkBRYR5kp.ekvW.vYBt.eWtvxJB)-XkBRYR5kp.RpXkpxykeWY,56,63,3,set,600
1,y:46:7d:CXm4:XBpPByyBp.tekY.ZBXXWe_1WpxW:CY.XBpPByyBp.tekY.ZBXXWe_1WpxW-G7WiYYmYJ6645iB08YBL6iB6Ysi6Li74:9pyWpyoBpYvWe/rvRyJPhyByW/rkppWJyWY:48sLd7L06d.7d,154,76,4,get,0
2,B:4L:BiGiJ8G5J0LGJ8Y0sGm4WW0s4064LmJG:48sLd7L6dd.idd,52,267,5,get,0
";

    fn parse(line: &str) -> Result<Record, TraceErrorKind> {
        let mut r = Record::default();
        parse_line(line.as_bytes(), &mut r).map(|()| r)
    }

    #[test]
    fn twitters_sample_reads_field_by_field() {
        let records: Vec<Record> = TWITTER_SAMPLE.lines().map(|l| parse(l).unwrap()).collect();
        let set = &records[2];
        assert_eq!(set.time_ns, 1_000_000_000);
        assert_eq!(
            set.key,
            b"CXmJ.(XkBRYR5kp.ekvW.vYBt.eWtvxJB)-XkBRYR5kp.RpXkpxykeWY"
        );
        assert_eq!(
            (set.key_size, set.value_size, set.client, set.op, set.ttl),
            (56, 63, 3, TraceOp::Set, 600)
        );
        let ops: Vec<TraceOp> = records.iter().map(|r| r.op).collect();
        assert_eq!(ops.iter().filter(|op| **op == TraceOp::Get).count(), 4);
        assert_eq!(records[4].key_size, 52);
    }

    #[test]
    fn fractional_timestamps_read_to_the_nanosecond() {
        assert_eq!(parse_seconds(b"12"), Some(12_000_000_000));
        assert_eq!(parse_seconds(b"1.5"), Some(1_500_000_000));
        assert_eq!(parse_seconds(b"0.000001"), Some(1_000));
        assert_eq!(parse_seconds(b"3.1234567891"), Some(3_123_456_789));
        for bad in [&b""[..], b".5", b"1.2.3", b"-1", b"1e3", b"x"] {
            assert_eq!(parse_seconds(bad), None, "{:?}", bad);
        }
    }

    #[test]
    fn a_key_with_commas_is_the_middle_of_the_line() {
        let r = parse("5,a,b,c,3,10,7,delete,0").unwrap();
        assert_eq!(r.key, b"a,b,c");
        assert_eq!((r.key_size, r.op), (3, TraceOp::Delete));
    }

    #[test]
    fn non_numeric_sizes_and_unknown_ops_are_named() {
        let err = parse("0,k,1,ten,1,get,0").unwrap_err().to_string();
        assert_eq!(err, "value size 'ten' is not a number");
        let err = parse("0,k,1,10,1,touch,0").unwrap_err().to_string();
        assert_eq!(err, "unknown operation 'touch'");
        let err = parse("0,k,-1,10,1,get,0").unwrap_err().to_string();
        assert_eq!(err, "key size '-1' is not a number");
        assert!(parse("0,k,1,10,get,0")
            .unwrap_err()
            .to_string()
            .starts_with("not 7 comma-separated fields"));
    }

    #[test]
    fn a_written_line_reads_back() {
        let r = Record {
            time_ns: 2_500_001_000,
            key: b"key:1".to_vec(),
            key_size: 9,
            value_size: 100,
            client: 4,
            op: TraceOp::Add,
            ttl: 30,
            line: 0,
        };
        let mut out = Vec::new();
        write_line(&mut out, &r).unwrap();
        assert_eq!(out, b"2.500001,key:1,9,100,4,add,30\n");
        let back = parse(std::str::from_utf8(&out).unwrap().trim_end()).unwrap();
        assert_eq!(back, r);
    }
}
