//! The engine's rules in simulated time: the test plays the server, answering the bytes
//! the engine composed, and passes the clock in.

use std::collections::HashSet;
use std::rc::Rc;

use rand::SeedableRng;

use super::*;
use crate::config::{DataSize, Workload};
use crate::cycle::{GetKeys, Ratio};
use crate::keys::{KeyPattern, KeyRange};
use crate::record::Window;
use crate::schedule::Arrival;
use crate::workload::Values;

const MS: u64 = 1_000_000;

pub(super) fn workload(sets: u32, gets: u32, keys: u64, pattern: KeyPattern) -> Workload {
    Workload {
        protocol: Protocol::MemcacheText,
        ratio: Ratio { sets, gets },
        get_keys: GetKeys::Every(1),
        data_size: DataSize::Fixed(4),
        expiry: None,
        random_data: false,
        key_prefix: "k:".into(),
        keys: KeyRange::new(0, keys - 1),
        set_pattern: pattern,
        get_pattern: pattern,
        key_size: None,
        lone_get_share: 0.0,
        lookaside: false,
        preset: None,
        key_dist: None,
    }
}

pub(super) fn rules(pipeline: usize) -> Rules {
    Rules {
        protocol: Protocol::MemcacheText,
        pipeline,
        stop_issuing_ns: u64::MAX,
        reconnect_interval: None,
        lookaside: false,
        timestamps: TimestampMode::User,
    }
}

pub(super) fn engine(
    rules: Rules,
    w: &Workload,
    budget: Option<u64>,
    schedule: Option<Schedule>,
) -> Engine {
    let values = Rc::new(Values::new(w.data_size.max(), false, 1));
    let mut e = Engine::new(rules, Generator::new(w, 1, 0, 1, values), budget, schedule);
    e.start_session();
    e
}

pub(super) fn recorder() -> Recorder {
    Recorder::new(Window {
        start_ns: 0,
        end_ns: u64::MAX,
    })
}

/// A memcached in miniature: answers each request in `wire` (sets store, gets hit
/// what was stored) and returns the requests' first words in order.
pub(super) struct Server {
    stored: HashSet<Vec<u8>>,
}

impl Server {
    pub(super) fn new() -> Server {
        Server {
            stored: HashSet::new(),
        }
    }

    pub(super) fn answer(&mut self, wire: &[u8]) -> (Vec<u8>, Vec<String>) {
        let text = String::from_utf8(wire.to_vec()).expect("text requests");
        let mut lines = text.split("\r\n");
        let (mut replies, mut ops) = (Vec::new(), Vec::new());
        while let Some(line) = lines.next() {
            let words: Vec<&str> = line.split(' ').collect();
            match words[0] {
                "set" => {
                    lines.next(); // the data block
                    self.stored.insert(words[1].as_bytes().to_vec());
                    replies.extend_from_slice(b"STORED\r\n");
                }
                "get" => {
                    for key in &words[1..] {
                        if self.stored.contains(key.as_bytes()) {
                            replies
                                .extend_from_slice(format!("VALUE {key} 0 1\r\nx\r\n").as_bytes());
                        }
                    }
                    replies.extend_from_slice(b"END\r\n");
                }
                "" => continue,
                other => panic!("unexpected request {other}"),
            }
            ops.push(line.to_string());
        }
        (replies, ops)
    }
}

/// The forms of one server, the lane every unsharded connection has.
impl Engine {
    pub(super) fn issue(
        &mut self,
        now: u64,
        out: &mut Vec<u8>,
        recorder: &mut Recorder,
        write_ns: impl FnOnce() -> u64,
    ) -> usize {
        self.issue_lanes(now, std::slice::from_mut(out), recorder, write_ns)
    }

    pub(super) fn wrote(&mut self, n: usize) {
        self.wrote_on(0, n);
    }

    pub(super) fn replies(
        &mut self,
        buf: &[u8],
        recorder: &mut Recorder,
        times: impl FnMut(&Pending) -> Times,
    ) -> Result<usize, ReplyError> {
        self.replies_on(0, buf, recorder, times)
    }

    pub(super) fn pending(&self) -> &VecDeque<Pending> {
        self.pending_on(0)
    }
}

pub(super) fn at(now: u64) -> impl FnMut(&Pending) -> Times {
    move |p: &Pending| Times {
        intended_ns: p.start_ns,
        transmitted_ns: None,
        received_ns: None,
        wire: None,
        read_ns: now,
    }
}

#[test]
fn the_closed_loop_keeps_the_pipeline_full_and_a_refill_leaves_in_one_write() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(4), &w, None, None);
    let (mut rec, mut server, mut out) = (recorder(), Server::new(), Vec::new());
    assert_eq!(e.issue(0, &mut out, &mut rec, || 10_000), 4);
    e.wrote(out.len());
    let (replies, ops) = server.answer(&out);
    assert_eq!(ops, ["get k:0", "get k:1", "get k:2", "get k:3"]);
    // Two replies arrive: two requests refill the pipeline, composed together.
    let two = b"END\r\nEND\r\n".len();
    assert_eq!(e.replies(&replies[..two], &mut rec, at(50_000)), Ok(two));
    out.clear();
    assert_eq!(e.issue(60_000, &mut out, &mut rec, || 70_000), 2);
    assert_eq!(server.answer(&out).1, ["get k:4", "get k:5"]);
    assert_eq!(e.pending().len(), 4);
    // The closed loop's latency runs from the write: 50 - 10 us.
    assert_eq!(rec.totals.completed, 2);
    assert_eq!(rec.total().moments.mean, 40.0);
}

#[test]
fn nothing_is_composed_while_the_pipeline_is_full() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(2), &w, None, None);
    let (mut rec, mut out) = (recorder(), Vec::new());
    assert_eq!(e.issue(0, &mut out, &mut rec, || 0), 2);
    assert_eq!(e.issue(MS, &mut out, &mut rec, || MS), 0);
    assert_eq!(e.idle(MS), None);
}

#[test]
fn the_open_loop_sends_on_its_schedule_whatever_is_outstanding() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
    let schedule = Schedule::new(Arrival::Fixed, 1000.0, 0, 1, &mut rng);
    let mut e = engine(rules(1), &w, None, Some(schedule));
    let (mut rec, mut out) = (recorder(), Vec::new());
    assert_eq!(e.next_due(false), Some(0));
    // At 3.5 ms the requests due at 0, 1, 2 and 3 ms go, in one write, none answered.
    assert_eq!(e.issue(3 * MS + MS / 2, &mut out, &mut rec, || 4 * MS), 4);
    assert_eq!(e.next_due(false), Some(4 * MS));
    assert_eq!(
        e.next_due(true),
        None,
        "a full socket is waited for, not the clock"
    );
    let starts: Vec<u64> = e.pending().iter().map(|p| p.start_ns).collect();
    assert_eq!(starts, [0, MS, 2 * MS, 3 * MS]);
    // Send lag: each from its due time to the write at 4 ms.
    assert_eq!(rec.send_lag_moments.count, 4);
    assert_eq!(rec.send_lag_moments.mean, 2500.0);
    // Latency runs from the scheduled time, so the late send counts.
    let replies = b"END\r\n".repeat(4);
    assert_eq!(e.replies(&replies, &mut rec, at(5 * MS)), Ok(replies.len()));
    assert_eq!(rec.total().moments.mean, 3500.0);
}

#[test]
fn a_count_bound_run_stops_at_its_budget_and_then_is_done() {
    let w = workload(1, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(10), &w, Some(3), None);
    let (mut rec, mut server, mut out) = (recorder(), Server::new(), Vec::new());
    assert_eq!(e.issue(0, &mut out, &mut rec, || 0), 3);
    assert_eq!(e.idle(0), None, "replies are awaited");
    let (replies, _) = server.answer(&out);
    e.replies(&replies, &mut rec, at(1)).unwrap();
    assert_eq!(e.idle(1), Some(Idle::Done));
}

#[test]
fn no_request_starts_at_or_after_the_end_of_issuing() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut r = rules(4);
    r.stop_issuing_ns = 100;
    let mut e = engine(r, &w, None, None);
    let (mut rec, mut out) = (recorder(), Vec::new());
    assert_eq!(e.issue(100, &mut out, &mut rec, || 100), 0);
    assert_eq!(e.idle(100), Some(Idle::Done));
}

#[test]
fn a_session_of_the_reconnect_interval_is_recycled_once_answered() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut r = rules(8);
    r.reconnect_interval = Some(3);
    let mut e = engine(r, &w, None, None);
    let (mut rec, mut out) = (recorder(), Vec::new());
    assert_eq!(e.issue(0, &mut out, &mut rec, || 0), 3);
    assert_eq!(e.idle(0), None);
    let replies = b"END\r\n".repeat(3);
    e.replies(&replies, &mut rec, at(1)).unwrap();
    assert_eq!(e.idle(1), Some(Idle::Recycle));
    e.start_session();
    assert_eq!(e.issue(2, &mut out, &mut rec, || 2), 3);
}

#[test]
fn a_reply_split_across_reads_is_recorded_once_when_whole() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(1), &w, None, None);
    let (mut rec, mut out) = (recorder(), Vec::new());
    e.issue(0, &mut out, &mut rec, || 0);
    let reply = b"VALUE k:0 0 5\r\nhello\r\nEND\r\n";
    for n in 1..reply.len() {
        assert_eq!(e.replies(&reply[..n], &mut rec, at(1)), Ok(0), "{n} bytes");
    }
    assert_eq!(e.replies(reply, &mut rec, at(2)), Ok(reply.len()));
    assert_eq!(rec.totals.completed, 1);
    assert_eq!(rec.total().hits, 1);
}

#[test]
fn a_reply_that_cannot_answer_is_an_error_and_so_is_one_to_no_request() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(1), &w, None, None);
    let (mut rec, mut out) = (recorder(), Vec::new());
    assert!(e.replies(b"END\r\n", &mut rec, at(0)).is_err());
    e.issue(0, &mut out, &mut rec, || 0);
    assert!(e.replies(b"VALUE k:0 0 x\r\n", &mut rec, at(1)).is_err());
}

#[test]
fn what_is_outstanding_fails_with_the_connection() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(3), &w, None, None);
    let (mut rec, mut out) = (recorder(), Vec::new());
    e.issue(0, &mut out, &mut rec, || 0);
    e.fail_outstanding(5, true, &mut rec);
    assert_eq!((rec.totals.errors, rec.totals.timeouts), (3, 3));
    assert!(e.pending().is_empty());
}

#[test]
fn an_open_loop_counts_what_it_could_not_send_as_scheduled() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
    let schedule = Schedule::new(Arrival::Fixed, 1000.0, 0, 1, &mut rng);
    let mut r = rules(1);
    r.stop_issuing_ns = 10 * MS;
    let mut e = engine(r, &w, None, Some(schedule));
    let mut rec = recorder();
    e.account_unsent(&mut rec);
    assert_eq!(rec.scheduled_in_window, 10);
}

#[test]
fn a_lookaside_client_sets_the_key_its_get_missed_before_its_next_get() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut r = rules(1);
    r.lookaside = true;
    let mut e = engine(r, &w, None, None);
    let (mut rec, mut server, mut out) = (recorder(), Server::new(), Vec::new());
    let mut ops = Vec::new();
    for t in 0..4 {
        out.clear();
        e.issue(t, &mut out, &mut rec, || t);
        let (replies, sent) = server.answer(&out);
        ops.extend(sent);
        e.replies(&replies, &mut rec, at(t)).unwrap();
    }
    assert_eq!(
        ops,
        ["get k:0", "set k:0 0 0 4", "get k:1", "set k:1 0 0 4"]
    );
}

#[test]
fn a_lookaside_clients_hit_ratio_rises_from_zero_to_one() {
    // 20 keys drawn uniformly: each misses, is set, and then hits.
    let w = workload(0, 1, 20, KeyPattern::Uniform);
    let mut r = rules(4);
    r.lookaside = true;
    let mut e = engine(r, &w, None, None);
    let (mut rec, mut server, mut out) = (recorder(), Server::new(), Vec::new());
    let mut hit_ratio = Vec::new();
    for round in 0..400u64 {
        let now = round * MS;
        out.clear();
        e.issue(now, &mut out, &mut rec, || now);
        let (replies, _) = server.answer(&out);
        let (hits, misses) = (rec.total().hits, rec.total().misses);
        e.replies(&replies, &mut rec, at(now)).unwrap();
        let (h, m) = (rec.total().hits - hits, rec.total().misses - misses);
        if h + m > 0 {
            hit_ratio.push(h as f64 / (h + m) as f64);
        }
    }
    assert!(hit_ratio[0] < 0.5, "starts cold: {}", hit_ratio[0]);
    // Each key misses until its SET is in: once, or more when gets of it were already
    // in the pipeline behind the first.
    let misses = rec.total().misses;
    assert!((20..30).contains(&misses), "{misses} misses over 20 keys");
    assert!(hit_ratio.iter().rev().take(50).all(|r| *r == 1.0));
}

#[test]
fn without_lookaside_a_miss_sets_nothing() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(1), &w, None, None);
    let (mut rec, mut server, mut out) = (recorder(), Server::new(), Vec::new());
    for t in 0..3 {
        out.clear();
        e.issue(t, &mut out, &mut rec, || t);
        let (replies, sent) = server.answer(&out);
        assert!(sent[0].starts_with("get"));
        e.replies(&replies, &mut rec, at(t)).unwrap();
    }
}

#[test]
fn an_open_loops_lookaside_sets_are_sent_at_once_outside_its_offered_load() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
    let schedule = Schedule::new(Arrival::Fixed, 1000.0, 0, 1, &mut rng);
    let mut r = rules(1);
    r.lookaside = true;
    let mut e = engine(r, &w, None, Some(schedule));
    let (mut rec, mut server, mut out) = (recorder(), Server::new(), Vec::new());
    // The GET due at 0 misses; its SET goes at the next turn, before the GET due at 1 ms.
    e.issue(0, &mut out, &mut rec, || 0);
    let (replies, _) = server.answer(&out);
    e.replies(&replies, &mut rec, at(MS / 2)).unwrap();
    out.clear();
    assert_eq!(e.issue(MS / 2, &mut out, &mut rec, || MS / 2), 1);
    assert_eq!(server.answer(&out).1, ["set k:0 0 0 4"]);
    assert_eq!(e.pending()[0].start_ns, MS / 2, "timed from its own send");
    // Two sent; one scheduled, one in the offered load, one send lag.
    assert_eq!(rec.totals.sent, 2);
    assert_eq!((rec.scheduled_in_window, rec.sent_in_window), (1, 1));
    assert_eq!(rec.send_lag_moments.count, 1);
}
