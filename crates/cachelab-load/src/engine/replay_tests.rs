//! Replay through the engine in simulated time: a trace's records sent at their times
//! (divided by the speed), or as fast as the pipeline goes, and their replies read.

use std::cell::RefCell;
use std::rc::Rc;

use super::replay::{Feed, Spread};
use super::tests::{at, engine, recorder, rules, workload};
use super::*;
use crate::keys::KeyPattern;
use crate::trace::{Record, TraceOp};

const MS: u64 = 1_000_000;

/// Records 1 ms apart over `clients` clients (one connection each over the run, of which
/// this thread has `connections`): gets, with a set every fourth.
fn feed(n: u64, clients: u64, connections: usize, by_client: bool) -> Rc<RefCell<Feed>> {
    let records = (0..n).map(move |i| {
        let key = format!("key{i}").into_bytes();
        Ok(Record {
            time_ns: i * MS,
            key_size: key.len() as u32,
            key,
            value_size: if i % 4 == 0 { 10 } else { 0 },
            client: i % clients,
            op: if i % 4 == 0 {
                TraceOp::Set
            } else {
                TraceOp::Get
            },
            ..Record::default()
        })
    });
    let spread = Spread {
        total: clients as usize,
        first: 0,
    };
    Rc::new(RefCell::new(Feed::new(
        Box::new(records),
        connections,
        spread,
        by_client,
    )))
}

fn replaying(feed: &Rc<RefCell<Feed>>, conn: usize, speed: f64, pipeline: usize) -> Engine {
    let w = workload(0, 1, 10, KeyPattern::Sequential);
    let replay = Replay::new(feed.clone(), conn, speed, Protocol::MemcacheText);
    engine(rules(pipeline), &w, None, None).replaying(replay)
}

#[test]
fn a_timed_replay_sends_each_record_at_its_time_over_the_speed() {
    let f = feed(10, 1, 1, true);
    let mut e = replaying(&f, 0, 2.0, 1);
    let (mut rec, mut out) = (recorder(), Vec::new());
    assert!(e.is_open_loop());
    assert_eq!(e.next_due(false), Some(0));
    // At 2 ms (speed 2): the records of trace time 0..=4 ms are due, five of them.
    assert_eq!(e.issue(2 * MS, &mut out, &mut rec, || 2 * MS), 5);
    let starts: Vec<u64> = e.pending().iter().map(|p| p.start_ns).collect();
    assert_eq!(starts, [0, MS / 2, MS, 3 * MS / 2, 2 * MS]);
    assert_eq!(e.next_due(false), Some(5 * MS / 2));
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(
        text.starts_with("set key0 0 0 10\r\nxxxxxxxxxx\r\nget key1\r\n"),
        "{text}"
    );
    // Their replies: the set stored, the gets missed.
    let replies = b"STORED\r\nEND\r\nEND\r\nEND\r\nSTORED\r\n";
    assert_eq!(e.replies(replies, &mut rec, at(3 * MS)), Ok(replies.len()));
    assert_eq!(rec.ops[Op::Set.index()].completed, 2);
    assert_eq!(rec.ops[Op::Get.index()].misses, 3);
    assert_eq!(rec.totals.errors, 0);
}

#[test]
fn a_timed_replay_ends_with_its_trace() {
    let f = feed(3, 1, 1, true);
    let mut e = replaying(&f, 0, 1.0, 1);
    let (mut rec, mut out) = (recorder(), Vec::new());
    assert_eq!(e.issue(10 * MS, &mut out, &mut rec, || 10 * MS), 3);
    assert_eq!(e.idle(10 * MS), None, "replies are awaited");
    e.replies(b"STORED\r\nEND\r\nEND\r\n", &mut rec, at(11 * MS))
        .unwrap();
    assert_eq!(e.idle(11 * MS), Some(Idle::Done));
}

#[test]
fn an_untimed_replay_keeps_the_pipeline_full_from_the_shared_trace() {
    let f = feed(10, 3, 2, false);
    let mut a = replaying(&f, 0, 0.0, 3);
    let mut b = replaying(&f, 1, 0.0, 3);
    let (mut rec, mut out) = (recorder(), Vec::new());
    assert!(!a.is_open_loop());
    assert_eq!(a.issue(0, &mut out, &mut rec, || 0), 3);
    assert_eq!(b.issue(0, &mut out, &mut rec, || 0), 3);
    // Only records of clients 0 and 1 (the two connections' share of 2) are sent.
    let text = String::from_utf8(out).unwrap();
    assert!(
        !text.contains("key2\r\n") && !text.contains("key5\r\n"),
        "{text}"
    );
    assert_eq!(text.matches("key").count(), 6);
}
