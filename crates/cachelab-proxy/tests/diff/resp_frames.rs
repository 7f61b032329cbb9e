//! RESP frames of a command: as an array of bulk strings, inline, and malformed.
//!
//! Malformed frames are made from a valid command: bad lengths and counts, wrong type
//! bytes, over-long headers and lines, truncated frames, lengths that do not match
//! their strings, bare line feeds, a byte replaced.
//!
//! A frame Redis rejects as soon as it reads it (a protocol error, then Redis closes) is
//! followed by the sync request like any other, so pipelined requests behind it are
//! tested too. A frame that leaves Redis waiting, or whose bytes would run into the sync
//! request, is sent last and the connection's writing ended: Redis answers what it
//! could parse and closes, whatever the timing, and so must the proxy.

use rand::{Rng, RngExt};

use super::resp_gen::RespRequest;

/// Past Redis's 512 MiB `proto-max-bulk-len` (and the proxy's `--max-value-size`).
const OVER_BULK: &str = "600000000";
/// Past Redis's `INT_MAX` arguments (and the proxy's 2^20).
const OVER_COUNT: &str = "3000000000";
/// Past Redis's 64 KiB inline and header line (`PROTO_INLINE_MAX_SIZE`).
const OVER_LINE: usize = 70_000;

/// Where each header of `frame` (`*<n>` then one `$<len>` per argument) starts and
/// where its digits end (at its `\r`).
fn headers(args: &[Vec<u8>]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    let count = format!("*{}", args.len());
    out.push((pos, pos + count.len()));
    pos += count.len() + 2;
    for arg in args {
        let header = format!("${}", arg.len());
        out.push((pos, pos + header.len()));
        pos += header.len() + 2 + arg.len() + 2;
    }
    out
}

fn request(wire: Vec<u8>, last: bool) -> RespRequest {
    RespRequest {
        wire,
        last,
        // A frame Redis rejects at once (not left waiting) is a protocol error.
        closes: !last,
        known: None,
        clock: false,
    }
}

/// The array-of-bulk-strings frame of `args`.
pub fn array(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend(format!("${}\r\n", arg.len()).as_bytes());
        out.extend(arg);
        out.extend(b"\r\n");
    }
    out
}

/// The inline form: one line, arguments separated by a space, each quoted (with
/// Redis's escapes) when it holds a byte that would end or split it.
pub fn inline(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        let plain = !arg.is_empty()
            && arg
                .iter()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\'));
        if plain {
            out.extend(arg);
            continue;
        }
        out.push(b'"');
        for &b in arg {
            match b {
                b'"' | b'\\' => out.extend([b'\\', b]),
                b' ' | b'!'..=b'~' => out.push(b),
                _ => out.extend(format!("\\x{b:02x}").as_bytes()),
            }
        }
        out.push(b'"');
    }
    out.extend(b"\r\n");
    out
}

/// A malformed frame of `args`, or None when the command is kept whole: a multi-key
/// command whose hash tag a mutation broke would be refused by a sharded pool for
/// spanning servers (a documented difference, but Redis would have run it), and a
/// mutated `SELECT` may name another database, which the proxy refuses and Redis
/// switches to (a documented difference that would part the two streams), and a mutated
/// `EVAL` may count no keys, which the proxy refuses (documented) and Redis runs.
pub fn mutated<R: Rng>(rng: &mut R, args: &[Vec<u8>]) -> Option<RespRequest> {
    let one_tag = [
        &b"RENAME"[..],
        b"RENAMENX",
        b"RPOPLPUSH",
        b"LMOVE",
        b"SUNIONSTORE",
        b"SINTERSTORE",
        b"MSETNX",
    ];
    let name = args[0].to_ascii_uppercase();
    if one_tag.contains(&name.as_slice())
        || [&b"SELECT"[..], b"EVAL", b"EVALSHA"].contains(&name.as_slice())
    {
        return None;
    }
    // A command on the key of large values, or a large frame, is malformed only in ways
    // that end it before it runs and never read its bytes as inline lines: Redis drops
    // the unwritten part of a large reply at the end of its input, and takes an inline
    // line over 64 KiB or refuses it depending on how its reads fall.
    let large = args.iter().any(|a| a.ends_with(b"big"))
        || args.iter().map(Vec::len).sum::<usize>() > 60_000;
    Some(malformed(rng, args, large))
}

/// One malformed frame from `args` (a non-empty command).
fn malformed<R: Rng>(rng: &mut R, args: &[Vec<u8>], large: bool) -> RespRequest {
    let mut frame = array(args);
    let heads = headers(args);
    // A bulk string's header, never the count's.
    let (arg_start, arg_end) = heads[rng.random_range(1..heads.len())];
    let replace = |frame: &mut Vec<u8>, start: usize, end: usize, with: &[u8]| {
        frame.splice(start..end, with.iter().copied());
    };
    const BEFORE_IT_RUNS: [u32; 5] = [0, 1, 2, 6, 7];
    let case = if large {
        BEFORE_IT_RUNS[rng.random_range(0..BEFORE_IT_RUNS.len())]
    } else {
        rng.random_range(0..12)
    };
    match case {
        0 => {
            // Redis: "expected '$', got ..."
            let byte = [b':', b'+', b'-', b'*', b'x', b' '][rng.random_range(0..6)];
            frame[arg_start] = byte;
            request(frame, false)
        }
        1 => {
            // Redis: "invalid bulk length"
            let bad = ["x", "-1", "-7", "+3", "03", " 3", "", OVER_BULK][rng.random_range(0..8)];
            replace(&mut frame, arg_start + 1, arg_end, bad.as_bytes());
            request(frame, false)
        }
        2 => {
            // Redis: "invalid multibulk length"
            let bad = ["x", "+2", "-", " 2", "1x", OVER_COUNT][rng.random_range(0..6)];
            replace(&mut frame, 1, heads[0].1, bad.as_bytes());
            request(frame, false)
        }
        3 => {
            // An empty array (`*0`, `*-1`): skipped, then the rest read as inline lines,
            // which may start another frame.
            let empty = ["0", "-1", "-5"][rng.random_range(0..3)];
            replace(&mut frame, 1, heads[0].1, empty.as_bytes());
            request(frame, true)
        }
        4 => {
            // A header line that never ends: "too big mbulk/bulk count string".
            let start = if rng.random_range(0..2) == 0 {
                0
            } else {
                arg_start
            };
            frame.truncate(start + 1);
            frame.extend(std::iter::repeat_n(b'1', OVER_LINE));
            request(frame, true)
        }
        5 => {
            // An inline line that never ends: "too big inline request".
            let mut line = args[0].clone();
            line.extend(std::iter::repeat_n(b'a', OVER_LINE));
            request(line, true)
        }
        6 | 7 => {
            // Truncated anywhere.
            frame.truncate(rng.random_range(1..frame.len()));
            request(frame, true)
        }
        8 => {
            // A length that does not match its string: longer swallows what follows,
            // shorter leaves bytes read as the next command.
            let index = heads.iter().position(|h| h.0 == arg_start).unwrap() - 1;
            let len = args[index].len() as i64 + [-2, -1, 1, 3][rng.random_range(0..4)];
            replace(
                &mut frame,
                arg_start + 1,
                arg_end,
                len.max(0).to_string().as_bytes(),
            );
            request(frame, true)
        }
        9 => {
            // A bare `\n` ends a header: Redis looks for the `\r`.
            let (_, end) = heads[rng.random_range(0..heads.len())];
            frame.remove(end);
            request(frame, true)
        }
        10 => {
            // Unbalanced quotes in an inline command: a protocol error.
            let mut line = args[0].clone();
            line.extend(b" \"unclosed\r\n");
            request(line, false)
        }
        _ => {
            let at = rng.random_range(0..frame.len());
            let bytes = b"*$:\r\n0-9 a\"";
            frame[at] = bytes[rng.random_range(0..bytes.len())];
            request(frame, true)
        }
    }
}
