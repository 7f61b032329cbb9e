//! How the replies of a split command's parts merge back into the client's reply:
//! `MGET` values in the client's key order, `DEL`/`UNLINK`/`EXISTS`/`TOUCH` counts
//! summed, `MSET` `OK` when every part is; an error from any part is the reply.

use bytes::BufMut;
use cachelab_protocol::resp::{put_array_header, put_bulk};
use cachelab_protocol::{parse_resp_reply, RespReply};
use thiserror::Error;

use crate::routing::plan::RespMerge;
use crate::routing::redis::commands::Split;

/// Why the parts' replies cannot be merged into one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum MergeError {
    /// A part answered with the wrong type or the wrong number of values: the server's
    /// reply stream is not what the command asked for.
    #[error("part {part} answered with an unexpected reply")]
    Unexpected { part: usize },
    #[error("summed counts overflow")]
    Overflow,
}

/// Merges the replies of a split command's parts (`replies[g]` answers group `g`;
/// `key_groups[i]` is the group of the client's i-th key) into the client's reply. An error reply from a part is the client's reply (the first in
/// part order, so the outcome does not depend on timing).
pub fn merge_parts(
    split: Split,
    replies: &[RespReply<'_>],
    key_groups: &[u32],
    out: &mut impl BufMut,
) -> Result<(), MergeError> {
    if let Some(RespReply::Error(text)) = replies.iter().find(|r| matches!(r, RespReply::Error(_)))
    {
        out.put_u8(b'-');
        out.put_slice(text);
        out.put_slice(b"\r\n");
        return Ok(());
    }
    match split {
        Split::Values => merge_values(replies, key_groups, out),
        Split::Sum => {
            let mut total: i64 = 0;
            for (part, reply) in replies.iter().enumerate() {
                let RespReply::Integer(n) = reply else {
                    return Err(MergeError::Unexpected { part });
                };
                total = total.checked_add(*n).ok_or(MergeError::Overflow)?;
            }
            out.put_slice(format!(":{total}\r\n").as_bytes());
            Ok(())
        }
        Split::AllOk | Split::Never => {
            if let Some(part) = replies.iter().position(|r| *r != RespReply::Simple(b"OK")) {
                return Err(MergeError::Unexpected { part });
            }
            out.put_slice(b"+OK\r\n");
            Ok(())
        }
    }
}

/// [`merge_parts`] from the parts' reply bytes (each one whole RESP reply, as the
/// worker read it) under a plan's merge rule.
pub fn merge_resp_parts(
    rule: RespMerge,
    parts: &[&[u8]],
    key_groups: &[u32],
    out: &mut impl BufMut,
) -> Result<(), MergeError> {
    let mut replies = Vec::with_capacity(parts.len());
    for (part, bytes) in parts.iter().enumerate() {
        match parse_resp_reply(bytes) {
            Ok((reply, _)) => replies.push(reply),
            Err(_) => return Err(MergeError::Unexpected { part }),
        }
    }
    let split = match rule {
        RespMerge::Values => Split::Values,
        RespMerge::Sum => Split::Sum,
        RespMerge::AllOk => Split::AllOk,
    };
    merge_parts(split, &replies, key_groups, out)
}

fn merge_values(
    replies: &[RespReply<'_>],
    key_groups: &[u32],
    out: &mut impl BufMut,
) -> Result<(), MergeError> {
    let mut parts = Vec::with_capacity(replies.len());
    for (part, reply) in replies.iter().enumerate() {
        let wanted = key_groups.iter().filter(|g| **g as usize == part).count();
        match reply {
            RespReply::Array(Some(elements)) if elements.len() == wanted => {
                parts.push(elements.iter())
            }
            _ => return Err(MergeError::Unexpected { part }),
        }
    }
    put_array_header(out, key_groups.len());
    for &group in key_groups {
        match parts[group as usize].next() {
            Some(RespReply::Bulk(Some(value))) => put_bulk(out, value),
            Some(RespReply::Bulk(None)) => out.put_slice(b"$-1\r\n"),
            _ => {
                return Err(MergeError::Unexpected {
                    part: group as usize,
                })
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replies(raw: &[&'static [u8]]) -> Vec<RespReply<'static>> {
        raw.iter().map(|r| parse_resp_reply(r).unwrap().0).collect()
    }

    fn merged(
        split: Split,
        raw: &[&'static [u8]],
        key_groups: &[u32],
    ) -> Result<Vec<u8>, MergeError> {
        let mut out = Vec::new();
        merge_parts(split, &replies(raw), key_groups, &mut out).map(|_| out)
    }

    #[test]
    fn mget_values_come_back_in_the_client_s_key_order() {
        let out = merged(
            Split::Values,
            &[b"*2\r\n$1\r\na\r\n$-1\r\n", b"*1\r\n$1\r\nb\r\n"],
            &[0, 1, 0],
        );
        assert_eq!(out.unwrap(), b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$-1\r\n");
    }

    #[test]
    fn del_unlink_exists_touch_counts_are_summed() {
        let out = merged(
            Split::Sum,
            &[b":2\r\n", b":0\r\n", b":1\r\n"],
            &[0, 0, 1, 2],
        );
        assert_eq!(out.unwrap(), b":3\r\n");
    }

    #[test]
    fn mset_is_ok_when_every_part_is_ok() {
        assert_eq!(
            merged(Split::AllOk, &[b"+OK\r\n", b"+OK\r\n"], &[0, 1]).unwrap(),
            b"+OK\r\n"
        );
    }

    #[test]
    fn an_error_from_any_part_is_the_client_s_reply() {
        let out = merged(
            Split::Values,
            &[
                b"*1\r\n$1\r\na\r\n",
                b"-WRONGTYPE Operation\r\n",
                b"-ERR later\r\n",
            ],
            &[0, 1, 2],
        );
        assert_eq!(out.unwrap(), b"-WRONGTYPE Operation\r\n");
        let out = merged(Split::AllOk, &[b"+OK\r\n", b"-OOM full\r\n"], &[0, 1]);
        assert_eq!(out.unwrap(), b"-OOM full\r\n");
    }

    #[test]
    fn a_part_reply_of_the_wrong_shape_is_not_merged() {
        assert_eq!(
            merged(Split::Values, &[b"*1\r\n$1\r\na\r\n"], &[0, 0]),
            Err(MergeError::Unexpected { part: 0 })
        );
        assert_eq!(
            merged(Split::Sum, &[b":1\r\n", b"+OK\r\n"], &[0, 1]),
            Err(MergeError::Unexpected { part: 1 })
        );
        assert_eq!(
            merged(Split::AllOk, &[b"+OK\r\n", b":1\r\n"], &[0, 1]),
            Err(MergeError::Unexpected { part: 1 })
        );
        assert_eq!(
            merged(Split::Values, &[b"*1\r\n*0\r\n"], &[0]),
            Err(MergeError::Unexpected { part: 0 })
        );
    }

    #[test]
    fn parts_read_as_bytes_merge_by_the_plan_s_rule() {
        let mut out = Vec::new();
        merge_resp_parts(
            RespMerge::Values,
            &[b"*1\r\n$1\r\nb\r\n", b"*1\r\n$-1\r\n"],
            &[1, 0],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, b"*2\r\n$-1\r\n$1\r\nb\r\n");
        assert_eq!(
            merge_resp_parts(RespMerge::Sum, &[b":1\r\n", b":x"], &[0, 1], &mut out),
            Err(MergeError::Unexpected { part: 1 })
        );
    }

    #[test]
    fn summed_counts_that_overflow_are_refused() {
        assert_eq!(
            merged(
                Split::Sum,
                &[b":9223372036854775807\r\n", b":1\r\n"],
                &[0, 1]
            ),
            Err(MergeError::Overflow)
        );
    }
}
