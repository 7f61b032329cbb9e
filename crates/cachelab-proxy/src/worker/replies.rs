//! Reading the servers' replies to a batch: each server's replies are parsed in the
//! order its messages went out, and a reply that shows the connection out of step
//! closes it so that nobody gets a reply meant for another request.

use std::future::poll_fn;
use std::task::Poll;
use std::time::Instant;

use bytes::Bytes;
use cachelab_protocol::{parse_reply, Reply, ReplyError};

use super::exchange::{fail_pending, refusal_line, Exchange, State};
use crate::backend::{Backend, FillError};
use crate::counters::Counters;
use crate::down::{Down, IdleEnd, OutOfStep};
use crate::health::FailureKind;
use crate::routing::answers::values_answer_request;

/// One pass over the pending exchanges: parses what has arrived, reads more where a reply
/// is incomplete; Ready when none is pending any more.
pub(super) fn poll_replies(
    cx: &mut std::task::Context<'_>,
    backends: &mut [Backend],
    exchanges: &mut [Exchange],
    blocked: &mut [bool],
    frames: &[Bytes],
    counters: &Counters,
) -> Poll<()> {
    blocked.iter_mut().for_each(|b| *b = false);
    let mut pending = false;
    for index in 0..exchanges.len() {
        if !matches!(exchanges[index].result, State::Pending) {
            continue;
        }
        let server = exchanges[index].server;
        if blocked[server] {
            pending = true;
            continue;
        }
        let backend = &mut backends[server];
        loop {
            match parse_reply(&backend.rbuf[backend.parsed..], exchanges[index].expect) {
                Ok((reply, len)) => {
                    let ex = &exchanges[index];
                    let foreign = matches!(reply, Reply::Values { hits, body_len } if hits > 0
                    && !values_answer_request(
                        &frames[ex.job],
                        &backend.rbuf[backend.parsed..backend.parsed + body_len],
                    ));
                    let step = if foreign {
                        Some(Relay::Nothing)
                    } else {
                        out_of_step(reply, ex.carries_data)
                    };
                    if step != Some(Relay::Nothing) {
                        exchanges[index].result = State::Done {
                            reply,
                            offset: backend.parsed,
                            len,
                            at: Instant::now(),
                        };
                        backend.parsed += len;
                        backend.answered();
                    }
                    if step.is_some() {
                        // Whatever follows on this connection may answer something
                        // else: close it, and let the requests after this one fail over.
                        backend.drop_connection(Down::OutOfStep(if foreign {
                            OutOfStep::Foreign
                        } else {
                            OutOfStep::ReadDifferently
                        }));
                        counters.record_out_of_step();
                        fail_pending(exchanges, server);
                    }
                    break;
                }
                Err(ReplyError::Incomplete) => match backend.poll_fill(cx) {
                    Poll::Ready(Ok(())) => continue,
                    Poll::Ready(Err(FillError::Connection(reason))) => {
                        backend.fail(FailureKind::Connection, reason);
                        fail_pending(exchanges, server);
                        break;
                    }
                    Poll::Ready(Err(refusal)) => {
                        // The rest of this reply is not wanted, and the connection is out
                        // of step; the server itself is fine.
                        let line = refusal_line(
                            exchanges[index].expect,
                            matches!(refusal, FillError::TooLarge),
                        );
                        exchanges[index].result = State::Refused {
                            at: Instant::now(),
                            line,
                        };
                        backend.drop_connection(Down::ReplyRefused);
                        fail_pending(exchanges, server);
                        break;
                    }
                    Poll::Pending => {
                        blocked[server] = true;
                        pending = true;
                        break;
                    }
                },
                Err(ReplyError::Malformed(_)) => {
                    // Not what was asked (a stray reply, or one read out of step): the
                    // connection goes, but a client's bytes must not eject a server.
                    backend.drop_connection(Down::OutOfStep(OutOfStep::Foreign));
                    counters.record_out_of_step();
                    fail_pending(exchanges, server);
                    break;
                }
            }
        }
    }
    if pending {
        Poll::Pending
    } else {
        Poll::Ready(())
    }
}

/// What to do with a reply that shows the server framed the request differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relay {
    /// The reply is the request's own (the first line the server wrote for it).
    Reply,
    /// The reply may belong to an earlier request: nobody gets it.
    Nothing,
}

/// Whether `reply` shows the connection is out of step, and whose it is. The proxy
/// forwards only commands the server knows, framed as the server frames them, so
/// `ERROR` means the server read something other than what was sent (it may even be
/// left over from an earlier request); a `CLIENT_ERROR` to a request with a data block
/// means the server may read that block as commands, each with a reply of its own.
fn out_of_step(reply: Reply, carries_data: bool) -> Option<Relay> {
    match reply {
        Reply::Error => Some(Relay::Nothing),
        Reply::ClientError if carries_data => Some(Relay::Reply),
        _ => None,
    }
}

/// Ready with (server, why) when one of the idle connections must be closed.
pub(super) async fn idle_closed(backends: &mut [Backend]) -> (usize, IdleEnd) {
    poll_fn(|cx| {
        for (server, backend) in backends.iter_mut().enumerate() {
            if let Poll::Ready(end) = backend.poll_idle_closed(cx) {
                return Poll::Ready((server, end));
            }
        }
        Poll::Pending
    })
    .await
}
