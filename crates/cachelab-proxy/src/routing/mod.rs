//! Where requests go and which reply a client gets: pure functions, no I/O.
//!
//! - Reads are assigned round-robin at decode time, so assignment order equals arrival
//!   order; [`RoundRobin`] is the one counter the net layer shares.
//! - A sharded multi-GET of k keys over n servers is split into `min(k, n)` consecutive
//!   parts whose sizes differ by at most one, larger parts first ([`split_sizes`]: 7 keys
//!   over 3 servers are 3, 2, 2); part i goes to server `(first + i) mod n`.
//! - A replicated request gets the success reply if every server succeeded, otherwise the
//!   failure that arrived last ([`pick_replicated_reply`]).

use std::sync::atomic::{AtomicU64, Ordering};

use cachelab_protocol::{Expect, Reply};

/// The shared round-robin position over `servers` servers.
#[derive(Debug)]
pub struct RoundRobin {
    next: AtomicU64,
    servers: usize,
}

impl RoundRobin {
    pub fn new(servers: usize) -> Self {
        assert!(servers > 0);
        RoundRobin {
            next: AtomicU64::new(0),
            servers,
        }
    }

    /// The server for the next single-target read.
    pub fn one(&self) -> usize {
        self.take(1)
    }

    /// The first of `parts` consecutive servers (mod n) for a sharded multi-GET; the
    /// counter moves past all of them, so the next read continues the rotation.
    pub fn take(&self, parts: usize) -> usize {
        let first = self.next.fetch_add(parts as u64, Ordering::Relaxed);
        (first % self.servers as u64) as usize
    }
}

/// Sizes of the consecutive parts a sharded multi-GET of `keys` keys is split into.
pub fn split_sizes(keys: usize, servers: usize) -> impl ExactSizeIterator<Item = usize> + Clone {
    let parts = keys.min(servers).max(1);
    let base = keys / parts;
    let extra = keys % parts;
    (0..parts).map(move |i| base + usize::from(i < extra))
}

/// Whether a server's reply to a replicated request counts as success.
pub fn is_success(expect: Expect, reply: Reply) -> bool {
    matches!(
        (expect, reply),
        (Expect::Store, Reply::Stored)
            | (Expect::Delete, Reply::Deleted)
            | (Expect::Arith, Reply::Number(_))
            | (Expect::Touch, Reply::Touched)
            | (Expect::Ok, Reply::Ok)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rotate_over_the_servers_in_arrival_order() {
        let rr = RoundRobin::new(3);
        let picks: Vec<usize> = (0..7).map(|_| rr.one()).collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn a_sharded_multi_get_advances_the_rotation_by_its_parts() {
        let rr = RoundRobin::new(3);
        assert_eq!(rr.take(2), 0);
        assert_eq!(rr.one(), 2);
        assert_eq!(rr.take(3), 0);
    }

    #[test]
    fn seven_keys_over_three_servers_split_three_two_two() {
        assert_eq!(split_sizes(7, 3).collect::<Vec<_>>(), vec![3, 2, 2]);
    }

    #[test]
    fn split_sizes_follow_the_rule_for_documented_cases() {
        let cases: &[(usize, usize, &[usize])] = &[
            (1, 3, &[1]),
            (3, 3, &[1, 1, 1]),
            (6, 3, &[2, 2, 2]),
            (9, 3, &[3, 3, 3]),
            (2, 3, &[1, 1]),
            (5, 2, &[3, 2]),
            (4, 1, &[4]),
        ];
        for (keys, servers, expected) in cases {
            assert_eq!(
                split_sizes(*keys, *servers).collect::<Vec<_>>(),
                *expected,
                "{keys} keys over {servers}"
            );
        }
    }

    #[test]
    fn split_sizes_cover_every_key_and_differ_by_at_most_one() {
        for keys in 1..40 {
            for servers in 1..8 {
                let sizes: Vec<usize> = split_sizes(keys, servers).collect();
                assert_eq!(sizes.iter().sum::<usize>(), keys);
                assert_eq!(sizes.len(), keys.min(servers));
                let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                assert!(max - min <= 1);
                assert!(sizes.windows(2).all(|w| w[0] >= w[1]));
            }
        }
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
    }
}
