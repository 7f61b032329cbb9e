//! A key's server: its hash-tag part hashed with the pool's hash, on the pool's
//! distribution, as twemproxy dispatches it with every server live.

use crate::hash::Hash;
use crate::ring::{Distribution, Member, Ring};

/// The part of `key` that is hashed: with a hash tag `{}`, what lies between its first
/// `{` and the next `}` when that is not empty, else the whole key (twemproxy's
/// `hash_tag`).
pub fn tagged(key: &[u8], tag: Option<[u8; 2]>) -> &[u8] {
    let Some([open, close]) = tag else {
        return key;
    };
    let Some(start) = memchr::memchr(open, key) else {
        return key;
    };
    match memchr::memchr(close, &key[start + 1..]) {
        Some(len) if len > 0 => &key[start + 1..start + 1 + len],
        _ => key,
    }
}

/// twemproxy's order of a pool's servers: it sorts them by name (shorter names first,
/// then bytewise) when it checks for duplicates, and keeps that order, which is what
/// modula and random index (ketama does not depend on it).
pub fn twemproxy_order(name: &str) -> (usize, &[u8]) {
    (name.len(), name.as_bytes())
}

/// A pool's placement: which of its servers holds each key.
#[derive(Debug, Clone)]
pub struct Placement {
    hash: Hash,
    tag: Option<[u8; 2]>,
    ring: Ring,
    /// The ring's members are in twemproxy's order; this gives each one's index in the
    /// order the pool was given.
    given: Vec<usize>,
}

impl Placement {
    /// `members` in any order: [`Placement::home`] answers with indices into it.
    pub fn new(hash: Hash, tag: Option<[u8; 2]>, kind: Distribution, members: &[Member]) -> Self {
        let mut given: Vec<usize> = (0..members.len()).collect();
        given.sort_by(|&a, &b| {
            twemproxy_order(&members[a].name).cmp(&twemproxy_order(&members[b].name))
        });
        let ordered: Vec<Member> = given.iter().map(|&i| members[i].clone()).collect();
        Placement {
            hash,
            tag,
            ring: Ring::new(kind, &ordered),
            given,
        }
    }

    pub fn servers(&self) -> usize {
        self.ring.members()
    }

    /// The server of `key`; `random` gives the number the `random` distribution draws
    /// with (it is not called for the others).
    pub fn home(&self, key: &[u8], random: impl FnOnce() -> u32) -> usize {
        if self.ring.members() == 1 {
            return 0;
        }
        let hash = match self.ring.kind() {
            Distribution::Random => random(),
            // twemproxy hashes an empty key to 0 (it never routes one).
            _ if key.is_empty() => 0,
            _ => self.hash.hash(tagged(key, self.tag)),
        };
        self.given[self.ring.home(hash)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<Member> {
        (0..n)
            .map(|i| Member {
                name: format!("127.0.0.1:{}", 11311 + i),
                weight: 1,
            })
            .collect()
    }

    #[test]
    fn the_hash_tag_picks_the_part_between_its_characters() {
        let tag = Some(*b"{}");
        assert_eq!(tagged(b"user:{42}:name", tag), b"42");
        assert_eq!(tagged(b"user:{}:name", tag), b"user:{}:name");
        assert_eq!(tagged(b"user:{42", tag), b"user:{42");
        assert_eq!(tagged(b"plain", None), b"plain");
    }

    #[test]
    fn a_key_goes_where_its_hash_lands_on_the_ring() {
        let m = members(3);
        let placement = Placement::new(Hash::Fnv1a64, None, Distribution::Ketama, &m);
        let ring = Ring::new(Distribution::Ketama, &m);
        for i in 0..1000 {
            let key = format!("key:{i}");
            let expected = ring.home(Hash::Fnv1a64.hash(key.as_bytes()));
            assert_eq!(placement.home(key.as_bytes(), || unreachable!()), expected);
        }
        let tagged = Placement::new(Hash::Fnv1a64, Some(*b"{}"), Distribution::Modula, &m);
        let home = tagged.home(b"a{x}", || 0);
        assert!((0..50).all(|i| tagged.home(format!("{i}{{x}}").as_bytes(), || 0) == home));
    }

    #[test]
    fn random_placement_uses_the_number_it_is_given() {
        let placement = Placement::new(Hash::Md5, None, Distribution::Random, &members(4));
        let homes: Vec<usize> = (0..4).map(|r| placement.home(b"k", || r)).collect();
        assert_eq!(homes, [0, 1, 2, 3]);
    }

    #[test]
    fn modula_counts_servers_in_twemproxys_order_and_answers_in_the_given_one() {
        let named = |names: &[&str]| -> Vec<Member> {
            names
                .iter()
                .map(|n| Member {
                    name: n.to_string(),
                    weight: 1,
                })
                .collect()
        };
        // twemproxy's order is b, aa, ab: shorter names first, then bytewise.
        let given = Placement::new(
            Hash::Md5,
            None,
            Distribution::Modula,
            &named(&["ab", "b", "aa"]),
        );
        let sorted = Ring::new(Distribution::Modula, &named(&["b", "aa", "ab"]));
        let back = [1, 2, 0]; // sorted position -> given position
        for i in 0..300 {
            let key = format!("key:{i}");
            let expected = back[sorted.home(Hash::Md5.hash(key.as_bytes()))];
            assert_eq!(given.home(key.as_bytes(), || 0), expected);
        }
    }
}
