//! Where requests go and how their replies come back together: pure modules, no I/O.
//!
//! - [`plan`]: a request and its [`plan::Pool`] in, a [`plan::Plan`] out: the parts
//!   to send, the servers that may serve each (first choice, then stand-ins), and the
//!   [`plan::Merge`] rule. The worker carries plans out.
//! - [`merge`]: the reply rules: a replicated request gets the success reply if every
//!   server succeeded, otherwise the failure that arrived last; multi-GET parts are put
//!   back together in the client's key order with one `END`.
//! - [`answers`]: whether a reply can answer the request it was read for (a retrieval
//!   reply naming keys the request did not ask for was read out of step).
//! - [`spans`]: where each key of a multi-key request sits in its frame, found once
//!   at decode time.
//! - [`ring`] and [`hash`]: twemproxy's distributions (ketama, modula, random) and key
//!   hashes, bit for bit.
//! - [`redis`]: the same for Redis pools: the command table, refusals, placement,
//!   multi-key splits and merges.
//!
//! In a `replicate` pool (the spec's section 1), reads are assigned round-robin at
//! decode time, so assignment order equals arrival order; a split multi-GET (`-s`) of k
//! keys over n servers is cut into `min(k, n)` consecutive parts whose sizes differ by
//! at most one, larger parts first ([`split_sizes`]: 7 keys over 3 servers are 3, 2, 2),
//! part i going to server `(first + i) mod n`.

pub mod answers;
pub use cachelab_placement::{hash, ring};
pub mod merge;
pub mod plan;
pub mod redis;
pub mod spans;
#[cfg(test)]
pub(crate) mod test_support;

/// What a pool's clients and servers speak: memcached's text protocol, or RESP2 (a
/// Redis pool, whose commands are routed by [`redis`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    #[default]
    Memcached,
    Redis,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Memcached => "memcached",
            Protocol::Redis => "redis",
        }
    }
}

/// Sizes of the consecutive parts a split multi-GET of `keys` keys is cut into.
pub fn split_sizes(keys: usize, servers: usize) -> impl ExactSizeIterator<Item = usize> + Clone {
    let parts = keys.min(servers).max(1);
    let base = keys / parts;
    let extra = keys % parts;
    (0..parts).map(move |i| base + usize::from(i < extra))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
