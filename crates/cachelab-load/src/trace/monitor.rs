//! Redis `MONITOR` output, as redis-cli prints it and memtier_benchmark's
//! `--monitor-input` reads it:
//! `1339518083.107412 [0 127.0.0.1:60866] "SET" "k" "v"` (a `+` before the time, as on
//! the wire, is accepted; redis-cli's first line `OK` is skipped).
//!
//! Each argument is quoted as Redis's `sdscatrepr` writes it: `\"` and `\\`, `\n` `\r`
//! `\t` `\a` `\b`, and `\xHH` for any other byte that is not printable. The client is the
//! address in the brackets (`ip:port`, `unix:/path`, `lua`), hashed (FNV-1a) into the
//! record's client id, so memory stays bounded however many clients a trace has.
//!
//! Commands map to the trace's operations: GET → get, MGET → one get per key, SET → set
//! (with `NX` add, with `XX` replace, `EX`/`PX` as the TTL), SETEX/PSETEX → set, SETNX →
//! add, MSET → one set per pair, APPEND → append, DEL/UNLINK → one delete per key,
//! INCR/INCRBY → incr, DECR/DECRBY → decr. Commands that touch no key (PING, SELECT, AUTH,
//! HELLO, CLIENT, COMMAND, INFO, ECHO, QUIT, MULTI, EXEC, DISCARD) are skipped; any other
//! is refused.

use super::csv::{parse_seconds, shown};
use super::error::TraceErrorKind;
use super::{Record, TraceOp};

/// Commands that do nothing to the cache's data: skipped, not refused.
const SKIPPED: [&str; 12] = [
    "PING", "SELECT", "AUTH", "HELLO", "CLIENT", "COMMAND", "INFO", "ECHO", "QUIT", "MULTI",
    "EXEC", "DISCARD",
];

/// The records of one MONITOR line, pushed to `out` (none for a skipped line). Each has
/// the line's own time (since the epoch), not yet made relative to the trace's start.
pub fn parse_line(line: &[u8], out: &mut Vec<Record>) -> Result<(), TraceErrorKind> {
    let line = line.strip_prefix(b"+").unwrap_or(line);
    if line == b"OK" {
        return Ok(());
    }
    let malformed = |why: &str| {
        TraceErrorKind::Malformed(format!(
            "{why}: '{}' is not MONITOR output (time [db client] \"command\" \"arg\" ...)",
            shown(line)
        ))
    };
    let mut fields = line.splitn(4, |b| *b == b' ');
    let time = fields.next().unwrap_or_default();
    let db = fields.next().unwrap_or_default();
    let client = fields.next().unwrap_or_default();
    let args = fields.next().ok_or_else(|| malformed("too few fields"))?;
    let time_ns = parse_seconds(time).ok_or_else(|| TraceErrorKind::NotANumber {
        field: "timestamp",
        value: shown(time),
    })?;
    let client = client
        .strip_suffix(b"]")
        .filter(|_| db.starts_with(b"["))
        .ok_or_else(|| malformed("no [db client]"))?;
    let args = split_args(args).map_err(malformed)?;
    let name = args[0].to_ascii_uppercase();
    let name = String::from_utf8_lossy(&name);
    if SKIPPED.contains(&name.as_ref()) {
        return Ok(());
    }
    let record = |op: TraceOp, key: &[u8], value_size: usize, ttl: u32| Record {
        time_ns,
        key: key.to_vec(),
        key_size: key.len() as u32,
        value_size: value_size as u32,
        client: fnv1a(client),
        op,
        ttl,
        line: 0,
    };
    let arity = |min: usize| {
        if args.len() < min {
            Err(TraceErrorKind::Malformed(format!(
                "{name} with {} arguments",
                args.len() - 1
            )))
        } else {
            Ok(())
        }
    };
    let number = |arg: &[u8], field: &'static str| {
        std::str::from_utf8(arg)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| TraceErrorKind::NotANumber {
                field,
                value: shown(arg),
            })
    };
    match name.as_ref() {
        "GET" | "MGET" => {
            arity(2)?;
            for key in &args[1..] {
                out.push(record(TraceOp::Get, key, 0, 0));
            }
        }
        "SET" => {
            arity(3)?;
            let (mut op, mut ttl) = (TraceOp::Set, 0);
            let mut options = args[3..].iter();
            while let Some(option) = options.next() {
                match option.to_ascii_uppercase().as_slice() {
                    b"NX" => op = TraceOp::Add,
                    b"XX" => op = TraceOp::Replace,
                    unit @ (b"EX" | b"PX") => {
                        let n = number(options.next().map_or(&[][..], |a| a), "TTL")?;
                        ttl = if unit == b"EX" { n } else { n.div_ceil(1000) };
                    }
                    _ => {}
                }
            }
            out.push(record(op, &args[1], args[2].len(), clamp_ttl(ttl)));
        }
        "SETEX" | "PSETEX" => {
            arity(4)?;
            let n = number(&args[2], "TTL")?;
            let ttl = if name == "SETEX" { n } else { n.div_ceil(1000) };
            out.push(record(
                TraceOp::Set,
                &args[1],
                args[3].len(),
                clamp_ttl(ttl),
            ));
        }
        "SETNX" | "APPEND" => {
            arity(3)?;
            let op = if name == "SETNX" {
                TraceOp::Add
            } else {
                TraceOp::Append
            };
            out.push(record(op, &args[1], args[2].len(), 0));
        }
        "MSET" => {
            arity(3)?;
            for pair in args[1..].chunks(2) {
                let value = pair.get(1).map_or(0, Vec::len);
                out.push(record(TraceOp::Set, &pair[0], value, 0));
            }
        }
        "DEL" | "UNLINK" => {
            arity(2)?;
            for key in &args[1..] {
                out.push(record(TraceOp::Delete, key, 0, 0));
            }
        }
        "INCR" | "INCRBY" | "DECR" | "DECRBY" => {
            arity(2)?;
            let op = if name.starts_with("INCR") {
                TraceOp::Incr
            } else {
                TraceOp::Decr
            };
            out.push(record(op, &args[1], 0, 0));
        }
        _ => return Err(TraceErrorKind::UnknownOp(name.into_owned())),
    }
    Ok(())
}

fn clamp_ttl(seconds: u64) -> u32 {
    seconds.min(u64::from(u32::MAX)) as u32
}

/// FNV-1a, 64 bits: a stable id for a client address.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The arguments of a MONITOR line: double-quoted, separated by spaces, escaped as
/// `sdscatrepr` escapes them.
pub fn split_args(mut text: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
    let mut args = Vec::new();
    loop {
        while let [b' ', rest @ ..] = text {
            text = rest;
        }
        let [b'"', rest @ ..] = text else {
            return if text.is_empty() && !args.is_empty() {
                Ok(args)
            } else if text.is_empty() {
                Err("no command")
            } else {
                Err("an argument not in double quotes")
            };
        };
        text = rest;
        let mut arg = Vec::new();
        loop {
            match text {
                [b'"', rest @ ..] => {
                    if !matches!(rest, [] | [b' ', ..]) {
                        return Err("a closing quote not followed by a space");
                    }
                    text = rest;
                    break;
                }
                [b'\\', b'x', h, l, rest @ ..]
                    if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() =>
                {
                    arg.push(hex(*h) * 16 + hex(*l));
                    text = rest;
                }
                [b'\\', c, rest @ ..] => {
                    arg.push(match c {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'a' => 0x07,
                        b'b' => 0x08,
                        other => *other,
                    });
                    text = rest;
                }
                [c, rest @ ..] => {
                    arg.push(*c);
                    text = rest;
                }
                [] => return Err("an unterminated quote"),
            }
        }
        args.push(arg);
    }
}

fn hex(digit: u8) -> u8 {
    (digit as char).to_digit(16).unwrap_or(0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Vec<Record>, TraceErrorKind> {
        let mut out = Vec::new();
        parse_line(line.as_bytes(), &mut out).map(|()| out)
    }

    #[test]
    fn redis_documentations_example_line_reads() {
        let r = parse(r#"1339518083.107412 [0 127.0.0.1:60866] "SET" "k" "v""#).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].time_ns, 1_339_518_083_107_412_000);
        assert_eq!(
            (r[0].op, r[0].key.as_slice(), r[0].value_size),
            (TraceOp::Set, &b"k"[..], 1)
        );
        assert_eq!(r[0].client, fnv1a(b"127.0.0.1:60866"));
        let plus = parse(r#"+1339518083.107412 [0 127.0.0.1:60866] "get" "k""#).unwrap();
        assert_eq!((plus[0].op, plus[0].client), (TraceOp::Get, r[0].client));
    }

    #[test]
    fn sdscatrepr_escapes_read_back_to_the_bytes() {
        let args = split_args(br#""a\"b" "c\\d" "\x00\xff\n\r\t\a\b" "sp ace""#).unwrap();
        assert_eq!(
            args,
            [
                b"a\"b".to_vec(),
                b"c\\d".to_vec(),
                vec![0, 0xff, b'\n', b'\r', b'\t', 7, 8],
                b"sp ace".to_vec()
            ]
        );
        assert_eq!(
            split_args(br#""a"b""#),
            Err("a closing quote not followed by a space")
        );
        assert_eq!(split_args(br#""abc"#), Err("an unterminated quote"));
        assert_eq!(
            split_args(br#"SET "k""#),
            Err("an argument not in double quotes")
        );
    }

    #[test]
    fn commands_map_to_trace_operations() {
        let ops = |line: &str| -> Vec<(TraceOp, Vec<u8>, u32, u32)> {
            parse(line)
                .unwrap()
                .into_iter()
                .map(|r| (r.op, r.key, r.value_size, r.ttl))
                .collect()
        };
        let at = "1.5 [0 10.0.0.1:1]";
        assert_eq!(
            ops(&format!(r#"{at} "MGET" "a" "b""#)),
            [
                (TraceOp::Get, b"a".to_vec(), 0, 0),
                (TraceOp::Get, b"b".to_vec(), 0, 0)
            ]
        );
        assert_eq!(
            ops(&format!(r#"{at} "set" "a" "xyz" "NX" "PX" "1500""#)),
            [(TraceOp::Add, b"a".to_vec(), 3, 2)]
        );
        assert_eq!(
            ops(&format!(r#"{at} "SETEX" "a" "60" "xy""#)),
            [(TraceOp::Set, b"a".to_vec(), 2, 60)]
        );
        assert_eq!(ops(&format!(r#"{at} "DEL" "a" "b""#)).len(), 2);
        assert_eq!(
            ops(&format!(r#"{at} "INCRBY" "n" "5""#))[0].0,
            TraceOp::Incr
        );
        assert_eq!(ops(&format!(r#"{at} "DECR" "n""#))[0].0, TraceOp::Decr);
        assert_eq!(ops(&format!(r#"{at} "MSET" "a" "1" "b" "22""#))[1].2, 2);
        assert!(ops(&format!(r#"{at} "PING""#)).is_empty());
        assert!(ops("OK").is_empty());
    }

    #[test]
    fn other_commands_and_bad_lines_are_refused() {
        let at = "1.5 [0 10.0.0.1:1]";
        assert_eq!(
            parse(&format!(r#"{at} "HSET" "h" "f" "v""#))
                .unwrap_err()
                .to_string(),
            "unknown operation 'HSET'"
        );
        assert_eq!(
            parse(&format!(r#"{at} "GET""#)).unwrap_err().to_string(),
            "GET with 0 arguments"
        );
        assert!(parse("abc [0 x] \"GET\" \"k\"")
            .unwrap_err()
            .to_string()
            .contains("timestamp"));
        assert!(parse("1.0 0 x \"GET\" \"k\"")
            .unwrap_err()
            .to_string()
            .contains("no [db client]"));
    }
}
