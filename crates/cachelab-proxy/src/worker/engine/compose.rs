//! What each server is sent: a part of a request as its plan says, a compare-and-swap's
//! write for the other replicas, and which replies quiet mode leaves out.

use bytes::BytesMut;
use cachelab_protocol::{parse_request, Expect, Limits, Reply, Request as Parsed};

use super::conn::{Conn, OpenGet};
use crate::job::Request;
use crate::routing::plan::{Access, PartKeys, Plan};
use crate::routing::redis::plan as redis;
use crate::routing::spans::KeySpans;

/// Limits for re-parsing frames the decoder already accepted.
const REPARSE: Limits = Limits {
    max_key_len: usize::MAX,
    max_value_len: usize::MAX,
    max_line_len: usize::MAX / 4,
};

/// Whether quiet mode leaves this reply out (a quiet meta command's miss or success).
pub(super) fn quiet_drops(job: &Request, reply: Reply) -> bool {
    match (job.quiet, reply) {
        (Some(cmd), Reply::Meta(status)) => cmd.quiet_drops(status),
        _ => false,
    }
}

/// Writes the write a compare-and-swap applied at its primary, without the compare,
/// into `out` (`cas` becomes `set`; `ms`/`md`/`ma` lose their `C`), and says what reply
/// it gets; None for a frame that is not a compare-and-swap.
pub(super) fn compose_unconditional(frame: &[u8], out: &mut BytesMut) -> Option<Expect> {
    match parse_request(frame, &REPARSE) {
        Ok((Parsed::Store(store), _)) => {
            let set = cachelab_protocol::Store {
                op: cachelab_protocol::StoreOp::Set,
                cas_unique: None,
                noreply: false,
                ..store
            };
            set.compose(out);
            Some(Expect::Store)
        }
        Ok((Parsed::Meta(meta), _)) => {
            meta.compose_unconditional(out);
            Some(Expect::Meta)
        }
        _ => None,
    }
}

/// Writes part `part` of `job`'s plan, as its server gets it, into `out`: the frame as
/// received, or a `get`/`gets` of the part's keys (for a Redis command, the command
/// with the part's keys).
pub(super) fn compose(job: &Request, plan: &Plan, part: usize, out: &mut BytesMut) {
    match job.redis {
        Some(route) if plan.parts[part].keys != PartKeys::Whole => {
            redis::compose_part(&job.frame, &job.spans, route, &plan.key_parts, part, out)
        }
        _ => compose_part(&job.frame, &job.spans, job.access, plan, part, out),
    }
}

/// Composes part `part` of `job` into `conn`'s outgoing buffer: with `merge`
/// (`--merge-gets`), a retrieval joins the retrieval line the buffer ends with if it can
/// (true: its reply comes in that line's).
pub(super) fn compose_into(
    conn: &mut Conn,
    job: &Request,
    plan: &Plan,
    part: usize,
    merge: bool,
) -> bool {
    let Some(cas) = mergeable(job).filter(|_| merge) else {
        conn.open_get = None;
        compose(job, plan, part, &mut conn.wbuf);
        return false;
    };
    if let Some(open) = conn.joinable(cas) {
        append_keys(job, plan, part, &mut conn.wbuf);
        if conn.wbuf.len() - open.start <= MERGED_LINE_MAX {
            conn.open_get = Some(OpenGet {
                end: conn.wbuf.len(),
                ..open
            });
            return true;
        }
        // Too long with them: the line goes as it was, and they start the next.
        conn.wbuf.truncate(open.end - 2);
        conn.wbuf.extend_from_slice(b"\r\n");
    }
    let start = conn.wbuf.len();
    compose(job, plan, part, &mut conn.wbuf);
    let end = conn.wbuf.len();
    conn.open_get = Some(OpenGet { start, end, cas });
    false
}

/// [`compose`] from the request's parts: its frame, its keys' spans (found by the
/// decoder) and its access, which says whether the keys were asked with `gets`.
fn compose_part(
    frame: &[u8],
    spans: &KeySpans,
    access: Access,
    plan: &Plan,
    part: usize,
    out: &mut BytesMut,
) {
    if plan.parts[part].keys == PartKeys::Whole {
        out.extend_from_slice(frame);
        return;
    }
    let cas = access == Access::ReadCas;
    out.extend_from_slice(if cas { b"gets" } else { b"get" });
    keys_of_part(frame, spans, plan, part, |key| {
        out.extend_from_slice(b" ");
        out.extend_from_slice(key);
    });
    out.extend_from_slice(b"\r\n");
}

/// Calls `f` with each key part `part` of the retrieval `frame` asks its server for, in
/// the order they go out.
fn keys_of_part(frame: &[u8], spans: &KeySpans, plan: &Plan, part: usize, f: impl FnMut(&[u8])) {
    match plan.parts[part].keys {
        PartKeys::Whole => {
            let line = frame.strip_suffix(b"\r\n").unwrap_or(frame);
            line.split(|&b| b == b' ')
                .filter(|t| !t.is_empty())
                .skip(1)
                .for_each(f)
        }
        PartKeys::Consecutive { start, len } => spans.keys(frame).skip(start).take(len).for_each(f),
        PartKeys::Listed => spans
            .keys(frame)
            .zip(&plan.key_parts)
            .filter(|(_, &p)| p as usize == part)
            .map(|(key, _)| key)
            .for_each(f),
    }
}

/// A merged retrieval line grows no longer than this (`--merge-gets`): memcached reads
/// a line of up to 2,048 bytes without its large-multiget path.
pub(super) const MERGED_LINE_MAX: usize = 2048;

/// For `--merge-gets`: Some(whether it is a `gets`) when `job` is a memcached `get` or
/// `gets` of keys only, whose parts may go out in the line of another such request for
/// the same server; None for anything else.
fn mergeable(job: &Request) -> Option<bool> {
    if job.redis.is_some() || job.expect != Expect::Values || !job.frame.ends_with(b"\r\n") {
        return None;
    }
    if job.frame.starts_with(b"gets ") {
        Some(true)
    } else if job.frame.starts_with(b"get ") {
        Some(false)
    } else {
        None
    }
}

/// Calls `f` with each key part `part` of `job`'s plan asks for, in order.
pub(super) fn part_keys(job: &Request, plan: &Plan, part: usize, f: impl FnMut(&[u8])) {
    keys_of_part(&job.frame, &job.spans, plan, part, f)
}

/// Appends part `part`'s keys to the retrieval line that ends `out`: its `\r\n` goes
/// after them.
fn append_keys(job: &Request, plan: &Plan, part: usize, out: &mut BytesMut) {
    debug_assert!(out.ends_with(b"\r\n"), "a line to append to");
    out.truncate(out.len() - 2);
    part_keys(job, plan, part, |key| {
        out.extend_from_slice(b" ");
        out.extend_from_slice(key);
    });
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::plan::Part;

    fn get(frame: &[u8]) -> KeySpans {
        let Ok((Parsed::Get(get), _)) = parse_request(frame, &Limits::default()) else {
            panic!("not a get");
        };
        KeySpans::of(frame, get.keys.iter())
    }

    fn plan_of(parts: &[PartKeys], key_parts: &[u32]) -> Plan {
        let mut plan = Plan::default();
        for keys in parts {
            plan.parts.push(Part {
                keys: *keys,
                candidates: 0..1,
            });
        }
        plan.key_parts.extend_from_slice(key_parts);
        plan
    }

    fn composed(frame: &[u8], access: Access, plan: &Plan, part: usize) -> String {
        let mut out = BytesMut::new();
        compose_part(frame, &get(frame), access, plan, part, &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn a_whole_part_is_the_frame_as_received() {
        let frame = b"get  a  b\r\n";
        let plan = plan_of(&[PartKeys::Whole], &[]);
        assert_eq!(composed(frame, Access::Read, &plan, 0), "get  a  b\r\n");
    }

    #[test]
    fn consecutive_parts_take_their_run_of_keys_in_order() {
        let frame = b"get a b c d e f g\r\n";
        let plan = plan_of(
            &[
                PartKeys::Consecutive { start: 0, len: 3 },
                PartKeys::Consecutive { start: 3, len: 2 },
                PartKeys::Consecutive { start: 5, len: 2 },
            ],
            &[],
        );
        assert_eq!(composed(frame, Access::Read, &plan, 0), "get a b c\r\n");
        assert_eq!(composed(frame, Access::Read, &plan, 1), "get d e\r\n");
        assert_eq!(composed(frame, Access::Read, &plan, 2), "get f g\r\n");
    }

    #[test]
    fn listed_parts_take_the_keys_placed_on_them_and_gets_stays_gets() {
        let frame = b"gets k1 k2 k3 k1\r\n";
        let plan = plan_of(&[PartKeys::Listed, PartKeys::Listed], &[1, 0, 1, 1]);
        assert_eq!(composed(frame, Access::ReadCas, &plan, 0), "gets k2\r\n");
        assert_eq!(
            composed(frame, Access::ReadCas, &plan, 1),
            "gets k1 k3 k1\r\n"
        );
    }

    #[test]
    fn a_cas_becomes_a_set_for_the_other_replicas() {
        let mut out = BytesMut::new();
        let expect = compose_unconditional(b"cas k 5 0 2 77 noreply\r\nhi\r\n", &mut out);
        assert_eq!(expect, Some(Expect::Store));
        assert_eq!(&out[..], b"set k 5 0 2\r\nhi\r\n");
        out.clear();
        assert_eq!(compose_unconditional(b"get k\r\n", &mut out), None);
    }
}
