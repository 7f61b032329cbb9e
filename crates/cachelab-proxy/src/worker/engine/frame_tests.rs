//! Frames from a shared connection's demux ([`super::Framed`]) change nothing the engine
//! does: the same requests against the same simulated servers, read in pieces of any
//! size through the demux, get the same replies, failures and statistics whether the
//! engine takes the demux's frames or scans every reply itself. Nor does when the shell
//! clears the replies' buffer ([`super::Engine::clear_replies`]): a reply whose action
//! waits behind another keeps its bytes.

use proptest::prelude::*;

use super::sim::{Behaviour, Harness};
use super::tests::{
    behaviour, check_one_reply_each_in_order, memcached_request, redis_request, seeded, settings,
};

/// What a run did that a client or the statistics see.
fn seen(h: &Harness) -> String {
    let samples: Vec<String> = h
        .samples
        .iter()
        .map(|s| format!("{:?} {:?} {}", s.ts.sample(), s.outcome, s.failovers))
        .collect();
    format!(
        "{:?}\n{samples:?}\n{:?}\n{:?}\n{}",
        h.replies, h.failures, h.drops, h.out_of_step
    )
}

struct Case {
    redis: bool,
    replicas: Option<usize>,
    pipeline: usize,
    behaviours: Vec<(Behaviour, u64)>,
    batches: Vec<Vec<Vec<u8>>>,
    read_size: usize,
}

fn served(case: &Case, frames: bool, clear_often: bool) -> (Harness, usize) {
    let servers = Harness::servers_of(&case.behaviours);
    let mut h = Harness::new(servers, case.redis, settings(case.pipeline))
        .through_demux(frames, case.read_size);
    if clear_often {
        h = h.clearing_replies_often();
    }
    let taken = h.serve_batches(case.replicas, case.pipeline, &case.batches);
    (h, taken)
}

fn same_either_way(case: Case) {
    let (scanned, taken) = served(&case, false, false);
    let (framed, _) = served(&case, true, false);
    check_one_reply_each_in_order(&framed, taken);
    assert_eq!(seen(&scanned), seen(&framed));
    let (cleared, _) = served(&case, true, true);
    assert_eq!(seen(&scanned), seen(&cleared));
}

#[test]
fn whole_replies_and_replies_in_pieces_alike() {
    for read_size in [1, 7, 64, 4096] {
        same_either_way(Case {
            redis: false,
            replicas: None,
            pipeline: 4,
            behaviours: vec![(Behaviour::Normal, 50); 2],
            batches: vec![vec![
                b"set k1 0 0 2\r\nv1\r\n".to_vec(),
                b"get k1 k2\r\n".to_vec(),
                b"get k1\r\n".to_vec(),
                b"delete k1\r\n".to_vec(),
            ]],
            read_size,
        });
    }
}

proptest! {
    #![proptest_config(seeded())]

    #[test]
    fn memcached_replies_are_the_same_with_frames(
        replicas in prop::option::of(1usize..3),
        pipeline in 1usize..6,
        behaviours in prop::collection::vec((behaviour(), 0u64..200_000), 1..4),
        batches in prop::collection::vec(prop::collection::vec(memcached_request(), 1..6), 1..5),
        read_size in prop_oneof![1usize..16, 16usize..600],
    ) {
        same_either_way(Case { redis: false, replicas, pipeline, behaviours, batches, read_size });
    }

    #[test]
    fn redis_replies_are_the_same_with_frames(
        replicas in prop::option::of(1usize..3),
        pipeline in 1usize..6,
        behaviours in prop::collection::vec((behaviour(), 0u64..200_000), 1..4),
        batches in prop::collection::vec(prop::collection::vec(redis_request(), 1..6), 1..5),
        read_size in prop_oneof![1usize..16, 16usize..600],
    ) {
        same_either_way(Case { redis: true, replicas, pipeline, behaviours, batches, read_size });
    }
}
