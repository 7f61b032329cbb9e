//! How the replies of a request's parts become the client's reply. Pure functions over
//! byte slices: the worker hands in what each server answered.

use bytes::BytesMut;
use cachelab_protocol::{Expect, MetaStatus, Reply, RespKind};

/// Whether a server's reply to a replicated request counts as success (a Redis
/// command's: any reply but an error).
pub fn is_success(expect: Expect, reply: Reply) -> bool {
    if expect == Expect::Resp {
        return matches!(reply, Reply::Resp(kind) if kind != RespKind::Error);
    }
    matches!(
        (expect, reply),
        (Expect::Store, Reply::Stored)
            | (Expect::Delete, Reply::Deleted)
            | (Expect::Arith, Reply::Number(_))
            | (Expect::Touch, Reply::Touched)
            | (Expect::Ok, Reply::Ok)
            | (Expect::Meta, Reply::Meta(MetaStatus::Hd | MetaStatus::Va))
    )
}

/// One server's outcome for a replicated request, in the order needed to choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome<T: Ord + Copy> {
    pub success: bool,
    /// When the outcome became known (reply parsed, or failure detected).
    pub at: T,
}

/// Index of the outcome whose reply the client gets: the last success if all succeeded,
/// otherwise the last failure. Ties go to the later index.
pub fn pick_replicated_reply<T: Ord + Copy>(outcomes: &[Outcome<T>]) -> Option<usize> {
    let any_failure = outcomes.iter().any(|o| !o.success);
    outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| o.success != any_failure)
        .max_by_key(|(i, o)| (o.at, *i))
        .map(|(i, _)| i)
}

/// The key and total length of the `VALUE` block at the front of a values body that
/// `parse_reply` has already validated.
fn value_block(body: &[u8]) -> (&[u8], usize) {
    let line_end = memchr::memchr(b'\n', body).expect("a validated VALUE line") + 1;
    let line = &body[..line_end - 2];
    let mut tokens = line.split(|b| *b == b' ').filter(|t| !t.is_empty());
    let key = tokens.nth(1).expect("VALUE <key>");
    let len: usize = tokens
        .nth(1)
        .and_then(|t| std::str::from_utf8(t).ok())
        .and_then(|t| t.parse().ok())
        .expect("VALUE <key> <flags> <bytes>");
    (key, line_end + len + 2)
}

/// Writes the values of a multi-GET whose keys were grouped by server back in the
/// client's key order, then one `END`. `key_parts[i]` is the part that served the
/// client's i-th key; `bodies[p]` is part p's reply without its `END` (its values in the
/// order the part's keys were sent, misses left out, as memcached answers).
pub fn values_by_key<'k>(
    keys: impl Iterator<Item = &'k [u8]>,
    key_parts: &[u32],
    bodies: &[&[u8]],
    out: &mut BytesMut,
) {
    let mut cursor = vec![0usize; bodies.len()];
    for (key, &part) in keys.zip(key_parts) {
        let (body, at) = (bodies[part as usize], &mut cursor[part as usize]);
        if *at < body.len() {
            let (found, len) = value_block(&body[*at..]);
            if found == key {
                out.extend_from_slice(&body[*at..*at + len]);
                *at += len;
            }
        }
    }
    out.extend_from_slice(b"END\r\n");
}

/// Writes the values of multi-GET parts of consecutive keys, in part order, then `END`.
pub fn values_concat<'b>(bodies: impl Iterator<Item = &'b [u8]>, out: &mut BytesMut) {
    for body in bodies {
        out.extend_from_slice(body);
    }
    out.extend_from_slice(b"END\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redis_reply_succeeds_unless_it_is_an_error() {
        for kind in [
            RespKind::Simple,
            RespKind::Integer(0),
            RespKind::Bulk { null: true },
        ] {
            assert!(is_success(Expect::Resp, Reply::Resp(kind)), "{kind:?}");
        }
        assert!(!is_success(Expect::Resp, Reply::Resp(RespKind::Error)));
        assert!(!is_success(Expect::Resp, Reply::Stored));
    }

    #[test]
    fn all_stored_gives_stored() {
        let o = [
            Outcome {
                success: true,
                at: 3,
            },
            Outcome {
                success: true,
                at: 5,
            },
            Outcome {
                success: true,
                at: 4,
            },
        ];
        assert_eq!(pick_replicated_reply(&o), Some(1));
    }

    #[test]
    fn any_failure_gives_the_failure_that_arrived_last() {
        let o = [
            Outcome {
                success: false,
                at: 2,
            },
            Outcome {
                success: true,
                at: 9,
            },
            Outcome {
                success: false,
                at: 7,
            },
        ];
        assert_eq!(pick_replicated_reply(&o), Some(2));
    }

    #[test]
    fn success_depends_on_the_request_kind() {
        assert!(is_success(Expect::Store, Reply::Stored));
        assert!(!is_success(Expect::Store, Reply::NotStored));
        assert!(is_success(Expect::Arith, Reply::Number(1)));
        assert!(!is_success(Expect::Delete, Reply::NotFound));
        assert!(!is_success(Expect::Touch, Reply::ServerError));
        assert!(is_success(Expect::Meta, Reply::Meta(MetaStatus::Hd)));
        assert!(!is_success(Expect::Meta, Reply::Meta(MetaStatus::Ns)));
    }

    fn value(key: &str, data: &str) -> String {
        format!("VALUE {key} 0 {}\r\n{data}\r\n", data.len())
    }

    #[test]
    fn values_grouped_by_server_come_back_in_the_clients_order() {
        // Client asked c a b d; a and d went to part 0, c and b to part 1; b missed.
        let part0 = value("a", "1") + &value("d", "4");
        let part1 = value("c", "3");
        let keys: [&[u8]; 4] = [b"c", b"a", b"b", b"d"];
        let mut out = BytesMut::new();
        values_by_key(
            keys.into_iter(),
            &[1, 0, 1, 0],
            &[part0.as_bytes(), part1.as_bytes()],
            &mut out,
        );
        let expected = value("c", "3") + &value("a", "1") + &value("d", "4") + "END\r\n";
        assert_eq!(out, expected.as_bytes());
    }

    #[test]
    fn a_key_asked_twice_gets_its_value_twice() {
        let part = value("k", "v") + &value("k", "v");
        let keys: [&[u8]; 2] = [b"k", b"k"];
        let mut out = BytesMut::new();
        values_by_key(keys.into_iter(), &[0, 0], &[part.as_bytes()], &mut out);
        assert_eq!(out, (part + "END\r\n").as_bytes());
    }

    #[test]
    fn a_value_holding_a_newline_is_copied_whole() {
        let part = value("k", "a\r\nVALUE x 0 1\r\n");
        let keys: [&[u8]; 1] = [b"k"];
        let mut out = BytesMut::new();
        values_by_key(keys.into_iter(), &[0], &[part.as_bytes()], &mut out);
        assert_eq!(out, (part + "END\r\n").as_bytes());
    }

    #[test]
    fn consecutive_parts_are_concatenated_with_one_end() {
        let (a, b) = (value("a", "1"), value("b", "2"));
        let mut out = BytesMut::new();
        values_concat([a.as_bytes(), b"", b.as_bytes()].into_iter(), &mut out);
        assert_eq!(out, (a + &b + "END\r\n").as_bytes());
    }
}
