//! Backpressure by bytes: when a client may have another request dispatched.
//!
//! Counting requests in flight alone lets a client that pipelines GETs of a large value
//! and never reads make the proxy hold `--max-inflight` large replies (1,024 x 500 KB
//! is 500 MB) before the first unread byte stops it. memcached holds next to nothing
//! for such a client: it stops processing a connection whose output is not drained.
//! The proxy cannot stop that early, since it keeps several of a client's requests at
//! the servers to pipeline them; so it bounds the bytes those requests will bring:
//!
//! ```text
//! dispatch while  unread + in_flight x estimate  <  --max-pending-bytes
//!            and  in_flight                      <  --max-inflight
//! ```
//!
//! where `unread` is the bytes of replies waiting for the client to read them, and the
//! estimate is the largest reply the connection has been sent so far. A connection
//! that has had no reply yet has no estimate: it gets one request at the servers until
//! its first answer tells the size of what it asks for (one round trip, once per
//! connection). A client that never reads then costs at most `--max-pending-bytes`
//! plus one reply, and what it has not had dispatched waits unread in its socket.
//!
//! The estimate is a forecast, not a reservation: a client whose replies grow suddenly
//! (a thousand misses, then a thousand GETs of a large value pipelined at once) can
//! have its in-flight requests bring more than the limit once, before the first large
//! reply raises its estimate. The memory budget (`budget`) still bounds the process
//! then, refusing what does not fit with `SERVER_ERROR out of memory`.

/// What one client connection has been answered so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplyWindow {
    /// The largest reply sent to the connection, in bytes; None before its first.
    estimate: Option<usize>,
}

/// The two per-client limits, from `--max-inflight` and `--max-pending-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientLimits {
    pub max_inflight: usize,
    pub max_pending_bytes: usize,
}

impl ReplyWindow {
    /// Records a reply of `bytes` handed to the connection (0 for a request answered
    /// with nothing: noreply, or a quiet meta command's success).
    pub fn observe(&mut self, bytes: usize) {
        self.estimate = Some(self.estimate.map_or(bytes, |e| e.max(bytes)));
    }

    pub fn estimate(&self) -> Option<usize> {
        self.estimate
    }

    /// Whether one more request may be dispatched, with `in_flight` of the client's
    /// requests not yet answered and `unread` reply bytes waiting for it to read.
    pub fn may_dispatch(&self, in_flight: usize, unread: usize, limits: ClientLimits) -> bool {
        if in_flight >= limits.max_inflight || unread >= limits.max_pending_bytes {
            return false;
        }
        match self.estimate {
            None => in_flight == 0,
            Some(estimate) => {
                let forecast = unread.saturating_add(in_flight.saturating_mul(estimate));
                forecast < limits.max_pending_bytes
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LIMITS: ClientLimits = ClientLimits {
        max_inflight: 1024,
        max_pending_bytes: 4 << 20,
    };

    #[test]
    fn a_new_connection_has_one_request_at_the_servers_until_its_first_reply() {
        let window = ReplyWindow::default();
        assert!(window.may_dispatch(0, 0, LIMITS));
        assert!(!window.may_dispatch(1, 0, LIMITS));
    }

    #[test]
    fn small_replies_let_a_client_pipeline_up_to_max_inflight() {
        let mut window = ReplyWindow::default();
        window.observe(5);
        window.observe(40);
        assert!(window.may_dispatch(1023, 0, LIMITS));
        assert!(!window.may_dispatch(1024, 0, LIMITS));
    }

    #[test]
    fn large_replies_hold_in_flight_to_what_the_pending_limit_can_take() {
        let mut window = ReplyWindow::default();
        window.observe(500_000);
        // 4 MiB / 500 KB: eight replies in flight fit, a ninth would not
        assert!(window.may_dispatch(8, 0, LIMITS));
        assert!(!window.may_dispatch(9, 0, LIMITS));
        // what the client has not read counts too
        assert!(!window.may_dispatch(1, 4_000_000, LIMITS));
    }

    #[test]
    fn a_client_with_unread_replies_at_the_limit_gets_nothing_more() {
        let mut window = ReplyWindow::default();
        window.observe(10);
        assert!(!window.may_dispatch(0, 4 << 20, LIMITS));
        assert!(window.may_dispatch(0, (4 << 20) - 1, LIMITS));
    }

    #[test]
    fn the_estimate_is_the_largest_reply_so_far() {
        let mut window = ReplyWindow::default();
        window.observe(0);
        assert_eq!(window.estimate(), Some(0));
        window.observe(700);
        window.observe(30);
        assert_eq!(window.estimate(), Some(700));
    }

    #[test]
    fn silent_answers_count_as_answers() {
        // a bulk load of noreply sets pipelines once the first is done
        let mut window = ReplyWindow::default();
        window.observe(0);
        assert!(window.may_dispatch(500, 0, LIMITS));
    }

    proptest! {
        /// Whatever the replies seen, dispatching only while `may_dispatch` holds keeps
        /// unread plus forecast in-flight bytes within the limit plus one reply.
        #[test]
        fn dispatching_while_allowed_bounds_the_forecast(
            replies in proptest::collection::vec(0usize..2_000_000, 1..20),
            unread in 0usize..(8 << 20),
        ) {
            let mut window = ReplyWindow::default();
            for r in &replies {
                window.observe(*r);
            }
            let estimate = window.estimate().unwrap();
            let mut in_flight = 0;
            while window.may_dispatch(in_flight, unread, LIMITS) {
                in_flight += 1;
            }
            prop_assert!(in_flight <= LIMITS.max_inflight);
            if in_flight > 0 {
                let forecast = unread + in_flight * estimate;
                prop_assert!(forecast < LIMITS.max_pending_bytes + estimate.max(1));
            }
        }
    }
}
