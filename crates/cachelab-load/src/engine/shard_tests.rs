//! Client-side sharding in simulated time: every request on its key's server's lane,
//! placed as twemproxy places it; one pipeline over all lanes; each lane answered in
//! its own order; per-server counts.

use std::cell::RefCell;
use std::rc::Rc;

use cachelab_placement::hash::Hash;
use cachelab_placement::ring::{Distribution, Member};

use super::replay::{Feed, Spread};
use super::tests::{at, engine, recorder, rules, workload, Server};
use super::*;
use crate::keys::KeyPattern;
use crate::trace::{Record, TraceOp};

fn pool(n: usize) -> Rc<Placement> {
    let members: Vec<Member> = (0..n)
        .map(|i| Member {
            name: format!("127.0.0.1:{}", 11311 + i),
            weight: 1,
        })
        .collect();
    Rc::new(Placement::new(
        Hash::Fnv1a64,
        None,
        Distribution::Ketama,
        &members,
    ))
}

/// The keys of the text requests in `wire`, in order.
fn keys(wire: &[u8]) -> Vec<String> {
    String::from_utf8(wire.to_vec())
        .unwrap()
        .split("\r\n")
        .filter_map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            matches!(words[0], "get" | "set").then(|| words[1].to_string())
        })
        .collect()
}

#[test]
fn every_request_goes_to_the_server_twemproxy_would_choose() {
    let placement = pool(3);
    let w = workload(1, 1, 1000, KeyPattern::Uniform);
    let mut e = engine(rules(300), &w, None, None).sharded(placement.clone());
    let (mut rec, mut outs) = (recorder(), vec![Vec::new(); 3]);
    assert_eq!(e.issue_lanes(0, &mut outs, &mut rec, || 0), 300);
    let mut seen = 0;
    for (lane, out) in outs.iter().enumerate() {
        let keys = keys(out);
        assert!(keys.len() > 20, "lane {lane} got {} of 300", keys.len());
        for key in &keys {
            assert_eq!(placement.home(key.as_bytes(), || 0), lane, "{key}");
        }
        assert_eq!(e.composed(lane), out.len() as u64);
        assert_eq!(e.pending_on(lane).len(), keys.len());
        seen += keys.len();
    }
    assert_eq!((seen, e.outstanding()), (300, 300));
}

#[test]
fn one_pipeline_counts_what_waits_on_every_server_and_each_answers_in_its_order() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(4), &w, None, None).sharded(pool(2));
    let (mut rec, mut outs) = (recorder(), vec![Vec::new(); 2]);
    let mut servers = [Server::new(), Server::new()];
    assert_eq!(e.issue_lanes(0, &mut outs, &mut rec, || 10), 4);
    assert_eq!(
        e.issue_lanes(1, &mut outs, &mut rec, || 11),
        0,
        "the pipeline is full"
    );
    let busy = (0..2).find(|&l| !outs[l].is_empty()).unwrap();
    let waiting = e.pending_on(busy).len();
    e.wrote_on(busy, outs[busy].len());
    let (replies, _) = servers[busy].answer(&outs[busy]);
    // Only the first reply arrives: one request of that server is answered.
    let first = b"END\r\n".len();
    assert_eq!(
        e.replies_on(busy, &replies[..first], &mut rec, at(50)),
        Ok(first)
    );
    assert_eq!(e.pending_on(busy).len(), waiting - 1);
    assert_eq!(e.outstanding(), 3);
    outs.iter_mut().for_each(Vec::clear);
    assert_eq!(
        e.issue_lanes(60, &mut outs, &mut rec, || 70),
        1,
        "one slot refilled"
    );
    // The other server's replies answer its own requests only.
    let other = 1 - busy;
    if e.pending_on(other).is_empty() {
        assert!(
            e.replies_on(other, b"END\r\n", &mut rec, at(80)).is_err(),
            "a reply to no request"
        );
    }
    let counts = &rec.servers.servers;
    assert_eq!(counts[busy].window.completed, 1);
    assert_eq!(counts.iter().map(|c| c.sent).sum::<u64>(), 5);
    assert_eq!(rec.totals.sent, 5);
}

#[test]
fn a_lookaside_set_goes_to_the_server_of_the_key_that_missed() {
    let placement = pool(3);
    let w = workload(0, 1, 1000, KeyPattern::Uniform);
    let mut r = rules(1);
    r.lookaside = true;
    let mut e = engine(r, &w, None, None).sharded(placement.clone());
    let (mut rec, mut outs) = (recorder(), vec![Vec::new(); 3]);
    let mut servers = [Server::new(), Server::new(), Server::new()];
    for step in 0..30u64 {
        outs.iter_mut().for_each(Vec::clear);
        assert_eq!(e.issue_lanes(step, &mut outs, &mut rec, || step), 1);
        let lane = (0..3).find(|&l| !outs[l].is_empty()).unwrap();
        let key = keys(&outs[lane]).remove(0);
        assert_eq!(placement.home(key.as_bytes(), || 0), lane);
        let (replies, _) = servers[lane].answer(&outs[lane]);
        e.wrote_on(lane, outs[lane].len());
        e.replies_on(lane, &replies, &mut rec, at(step)).unwrap();
    }
    // Every miss was set on its own server: the servers together hold what was set.
    let sets: u64 = rec.ops[Op::Set.index()].completed;
    assert!(sets > 0 && sets < 30, "{sets} sets after misses");
}

#[test]
fn a_broken_connection_fails_what_waits_on_every_server() {
    let w = workload(0, 1, 100, KeyPattern::Sequential);
    let mut e = engine(rules(6), &w, None, None).sharded(pool(3));
    let (mut rec, mut outs) = (recorder(), vec![Vec::new(); 3]);
    assert_eq!(e.issue_lanes(0, &mut outs, &mut rec, || 0), 6);
    e.fail_outstanding(1_000_000, false, &mut rec);
    assert_eq!(e.outstanding(), 0);
    assert!((0..3).all(|l| e.pending_on(l).is_empty()));
    assert_eq!(rec.totals.errors, 6);
    let failed: u64 = rec.servers.servers.iter().map(|s| s.failed).sum();
    assert_eq!(failed, 6);
}

#[test]
fn a_replayed_record_goes_to_the_server_of_its_padded_key() {
    let placement = pool(2);
    let records = (0..40u64).map(|i| {
        Ok(Record {
            time_ns: i,
            key: format!("t{i}").into_bytes(),
            key_size: 8,
            client: 0,
            op: TraceOp::Get,
            ..Record::default()
        })
    });
    let one = Spread { total: 1, first: 0 };
    let feed = Rc::new(RefCell::new(Feed::new(Box::new(records), 1, one, false)));
    let w = workload(0, 1, 10, KeyPattern::Sequential);
    let replay = Replay::new(feed, 0, 0.0, Protocol::MemcacheText);
    let mut e = engine(rules(40), &w, None, None)
        .replaying(replay)
        .sharded(placement.clone());
    let (mut rec, mut outs) = (recorder(), vec![Vec::new(); 2]);
    assert_eq!(e.issue_lanes(0, &mut outs, &mut rec, || 0), 40);
    for (lane, out) in outs.iter().enumerate() {
        for key in keys(out) {
            assert_eq!(key.len(), 8, "padded to its recorded size");
            assert_eq!(placement.home(key.as_bytes(), || 0), lane, "{key}");
        }
    }
    assert_eq!(keys(&outs[0]).len() + keys(&outs[1]).len(), 40);
}
