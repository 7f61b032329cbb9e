//! One message to one server and what came of it: the record a worker keeps per
//! message of its batch, and the statistics timestamps derived from those records.

use std::time::Instant;

use cachelab_protocol::{Expect, Reply};

use crate::routing::plan::ServerId;

#[derive(Debug, Clone, Copy)]
pub(super) enum State {
    Pending,
    Done {
        reply: Reply,
        offset: usize,
        len: usize,
        at: Instant,
    },
    Failed {
        at: Instant,
    },
    /// The server answered, but the reply could not be held (too large for one request,
    /// or beyond the memory budget): the request is refused, not failed over.
    Refused {
        at: Instant,
        line: &'static [u8],
    },
}

/// The error line of a reply that could not be held, in the protocol of the request.
pub(super) fn refusal_line(expect: Expect, too_large: bool) -> &'static [u8] {
    match (expect, too_large) {
        (Expect::Resp, true) => b"-ERR reply too large (--max-reply-bytes)\r\n",
        (Expect::Resp, false) => b"-ERR cachelab-proxy is out of memory (--memory-budget)\r\n",
        (_, true) => b"SERVER_ERROR reply too large\r\n",
        (_, false) => b"SERVER_ERROR out of memory\r\n",
    }
}

/// One message to one server and what came of it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Exchange {
    /// The request of the batch it serves.
    pub(super) job: usize,
    pub(super) server: ServerId,
    /// The plan's part it carries.
    pub(super) part: usize,
    pub(super) expect: Expect,
    /// The message carries a data block (a storage command or ms): a server that
    /// refuses its line may read the block as commands of its own.
    pub(super) carries_data: bool,
    /// Its keys went out in the retrieval line of the exchange before it with the same
    /// server (`--merge-gets`): that line's one reply answers both ([`group`]).
    pub(super) joined: bool,
    pub(super) sent: Instant,
    pub(super) result: State,
}

/// The exchange after `at` that went out in the same message: the next exchange with
/// its server, if its keys were joined to that line (`--merge-gets`).
pub(super) fn next_joined(exchanges: &[Exchange], at: usize) -> Option<usize> {
    let server = exchanges[at].server;
    let next = at
        + 1
        + exchanges[at + 1..]
            .iter()
            .position(|ex| ex.server == server)?;
    exchanges[next].joined.then_some(next)
}

/// The exchanges one message carries: `head` and those joined to its line.
pub(super) fn group(exchanges: &[Exchange], head: usize) -> impl Iterator<Item = usize> + '_ {
    std::iter::successors(Some(head), |&at| next_joined(exchanges, at))
}

/// Settles `head` and the exchanges joined to its line with `result`: one reply (or
/// its absence) answers the one message they went out in.
pub(super) fn settle_group(exchanges: &mut [Exchange], head: usize, result: State) {
    let mut at = Some(head);
    while let Some(i) = at {
        exchanges[i].result = result;
        at = next_joined(exchanges, i);
    }
}

/// Fails the pending exchanges with `server`, at `now`.
pub(super) fn fail_pending(exchanges: &mut [Exchange], server: usize, now: Instant) {
    for ex in exchanges.iter_mut().filter(|e| e.server == server) {
        if matches!(ex.result, State::Pending) {
            ex.result = State::Failed { at: now };
        }
    }
}

/// When request `job` first reached a server and when its last server answered (or
/// failed, or had its reply refused): the server stage of the statistics file. A
/// message that failed the moment it was sent (or was staged for a server that was
/// down) never reached a server, so it does not start the stage; None where no message
/// reached a server or none was settled.
pub(super) fn server_span(
    exchanges: &[Exchange],
    job: usize,
) -> (Option<Instant>, Option<Instant>) {
    let mut first_sent: Option<Instant> = None;
    let mut last_answer: Option<Instant> = None;
    for ex in exchanges.iter().filter(|ex| ex.job == job) {
        if !matches!(ex.result, State::Failed { at } if at == ex.sent) {
            first_sent = Some(first_sent.map_or(ex.sent, |t| t.min(ex.sent)));
        }
        if let State::Done { at, .. } | State::Failed { at } | State::Refused { at, .. } = ex.result
        {
            last_answer = Some(last_answer.map_or(at, |t| t.max(at)));
        }
    }
    (first_sent, last_answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ex(job: usize, server: ServerId, sent: Instant, result: State) -> Exchange {
        Exchange {
            job,
            server,
            part: 0,
            expect: Expect::Store,
            carries_data: true,
            joined: false,
            sent,
            result,
        }
    }

    fn done(at: Instant) -> State {
        State::Done {
            reply: Reply::Stored,
            offset: 0,
            len: 8,
            at,
        }
    }

    #[test]
    fn the_server_stage_runs_from_the_first_send_to_the_last_answer() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let exchanges = [
            ex(0, 0, ms(1), done(ms(5))),
            ex(0, 1, ms(2), done(ms(9))),
            ex(1, 0, ms(0), done(ms(20))),
        ];
        assert_eq!(server_span(&exchanges, 0), (Some(ms(1)), Some(ms(9))));
    }

    #[test]
    fn a_message_that_failed_as_it_was_sent_never_reached_a_server() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        // server 0 was down when staged: failed at its own send time
        let exchanges = [
            ex(0, 0, ms(0), State::Failed { at: ms(0) }),
            ex(0, 1, ms(3), done(ms(7))),
        ];
        assert_eq!(server_span(&exchanges, 0), (Some(ms(3)), Some(ms(7))));
        // with no message reaching a server, the stage has no start
        let down = [ex(0, 0, ms(2), State::Failed { at: ms(2) })];
        assert_eq!(server_span(&down, 0), (None, Some(ms(2))));
    }

    #[test]
    fn a_timeout_ends_the_stage_when_it_is_noticed() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let exchanges = [
            ex(0, 0, ms(1), State::Failed { at: ms(1001) }),
            ex(0, 1, ms(1), State::Pending),
        ];
        assert_eq!(server_span(&exchanges, 0), (Some(ms(1)), Some(ms(1001))));
    }

    #[test]
    fn failing_a_server_settles_only_its_pending_exchanges() {
        let t0 = Instant::now();
        let mut exchanges = [
            ex(0, 0, t0, State::Pending),
            ex(1, 0, t0, done(t0)),
            ex(1, 1, t0, State::Pending),
        ];
        fail_pending(&mut exchanges, 0, t0);
        assert!(matches!(exchanges[0].result, State::Failed { .. }));
        assert!(matches!(exchanges[1].result, State::Done { .. }));
        assert!(matches!(exchanges[2].result, State::Pending));
    }
}
