//! Which server of a pool a key hash maps to: twemproxy's distributions, built as it
//! builds them (`nc_ketama.c`, `nc_modula.c`, `nc_random.c`), so the same configuration
//! puts every key on the same server.
//!
//! - **ketama**: each server gets `floor(w / W x 40 x n + 1e-10) x 4` points (w its
//!   weight, W the total, n the servers: 160 for equal weights), four per MD5 digest of
//!   `"<name>-<i>"`; a key goes to the first point at or after its hash, wrapping round.
//! - **modula**: server `i` appears `w_i` times in order; a key goes to entry
//!   `hash mod sum(w)`.
//! - **random**: any server, uniformly (what twemproxy does; for reads only sensible
//!   with replicated data).
//!
//! [`Ring::walk`] lists a key's servers in ring order: the first is its home, the next
//! ones are where twemproxy sends it when the home is ejected (its ring is rebuilt
//! without the ejected server, which for equal weights is the same as skipping that
//! server's points), and the first R distinct ones hold its R replicas.

use std::fmt::Write;

use crate::hash::md5_digest;

/// A server as a distribution sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The name hashed onto the ketama ring: the configured name, or `host:port`
    /// (`host` alone for port 11211, like libmemcached).
    pub name: String,
    pub weight: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    Ketama,
    Modula,
    Random,
}

impl Distribution {
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Ketama => "ketama",
            Distribution::Modula => "modula",
            Distribution::Random => "random",
        }
    }

    pub fn from_name(name: &str) -> Option<Distribution> {
        [
            Distribution::Ketama,
            Distribution::Modula,
            Distribution::Random,
        ]
        .into_iter()
        .find(|d| d.name() == name)
    }
}

const POINTS_PER_SERVER: f32 = 160.0;
const POINTS_PER_HASH: u32 = 4;

/// A built distribution over a pool's members (indices are positions in the pool).
#[derive(Debug, Clone)]
pub struct Ring {
    kind: Distribution,
    /// ketama: (point, member) sorted by point; modula: (0, member) per unit of weight.
    points: Vec<(u32, usize)>,
    members: usize,
}

impl Ring {
    pub fn new(kind: Distribution, members: &[Member]) -> Ring {
        assert!(!members.is_empty(), "a pool has at least one server");
        let points = match kind {
            Distribution::Ketama => ketama_points(members),
            Distribution::Modula => members
                .iter()
                .enumerate()
                .flat_map(|(i, m)| std::iter::repeat_n((0, i), m.weight as usize))
                .collect(),
            Distribution::Random => (0..members.len()).map(|i| (0, i)).collect(),
        };
        Ring {
            kind,
            points,
            members: members.len(),
        }
    }

    pub fn kind(&self) -> Distribution {
        self.kind
    }

    /// How many servers the ring places keys on.
    pub fn members(&self) -> usize {
        self.members
    }

    /// The position on the ring a key with this hash starts from (`random`: the given
    /// random number stands in for the hash).
    fn start(&self, hash: u32) -> usize {
        match self.kind {
            Distribution::Ketama => {
                let at = self.points.partition_point(|(point, _)| *point < hash);
                if at == self.points.len() {
                    0
                } else {
                    at
                }
            }
            Distribution::Modula | Distribution::Random => (hash as usize) % self.points.len(),
        }
    }

    /// The member a key hash maps to (twemproxy's dispatch, with every server live).
    pub fn home(&self, hash: u32) -> usize {
        if self.members == 1 {
            return 0;
        }
        self.points[self.start(hash)].1
    }

    /// Every member once, in ring order from the key's point: its home first.
    pub fn walk(&self, hash: u32) -> impl Iterator<Item = usize> + '_ {
        let start = if self.members == 1 {
            0
        } else {
            self.start(hash)
        };
        let mut seen = 0u64;
        let mut seen_big = Vec::new();
        let members = self.members;
        (0..self.points.len())
            .map(move |i| self.points[(start + i) % self.points.len()].1)
            .filter(move |&m| {
                if members <= 64 {
                    let fresh = seen & (1 << m) == 0;
                    seen |= 1 << m;
                    fresh
                } else if seen_big.contains(&m) {
                    false
                } else {
                    seen_big.push(m);
                    true
                }
            })
            .take(members)
    }
}

fn ketama_points(members: &[Member]) -> Vec<(u32, usize)> {
    let total: u32 = members.iter().map(|m| m.weight).sum();
    let live = members.len() as f32;
    let mut points = Vec::with_capacity(members.len() * 160);
    // One buffer for every `"<name>-<i>"`: a large pool hashes millions of them.
    let mut label = String::new();
    for (index, member) in members.iter().enumerate() {
        // Single-precision as in nc_ketama.c; the 1e-10 is a double, so the sum is
        // taken in double precision and converted back before floorf.
        let pct = member.weight as f32 / total as f32;
        let scaled = pct * POINTS_PER_SERVER / 4.0 * live;
        let per_server = ((f64::from(scaled) + 0.000_000_000_1) as f32).floor() as u32 * 4;
        for i in 0..per_server / POINTS_PER_HASH {
            label.clear();
            write!(label, "{}-{}", member.name, i).expect("writing to a String");
            let digest = md5_digest(label.as_bytes());
            for x in 0..POINTS_PER_HASH as usize {
                let point = u32::from_le_bytes([
                    digest[x * 4],
                    digest[x * 4 + 1],
                    digest[x * 4 + 2],
                    digest[x * 4 + 3],
                ]);
                points.push((point, index));
            }
        }
    }
    // Points were pushed in member order, so ordering ties by member is the stable sort
    // by point (what nc_ketama.c's qsort gives), without a stable sort's extra buffer.
    points.sort_unstable();
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<Member> {
        (0..n)
            .map(|i| Member {
                name: format!("127.0.0.1:{}", 20000 + i),
                weight: 1,
            })
            .collect()
    }

    #[test]
    fn ketama_gives_every_equal_server_160_points() {
        let ring = Ring::new(Distribution::Ketama, &members(3));
        assert_eq!(ring.points.len(), 480);
        for m in 0..3 {
            assert_eq!(ring.points.iter().filter(|p| p.1 == m).count(), 160);
        }
    }

    #[test]
    fn ketama_points_follow_the_weights() {
        let mut ms = members(2);
        ms[1].weight = 3;
        let ring = Ring::new(Distribution::Ketama, &ms);
        // 1/4 x 40 x 2 = 20 -> 80 points; 3/4 x 40 x 2 = 60 -> 240 points.
        assert_eq!(ring.points.iter().filter(|p| p.1 == 0).count(), 80);
        assert_eq!(ring.points.iter().filter(|p| p.1 == 1).count(), 240);
    }

    #[test]
    fn a_hash_past_the_last_point_wraps_to_the_first() {
        let ring = Ring::new(Distribution::Ketama, &members(3));
        assert_eq!(ring.home(u32::MAX), ring.points[0].1);
        let (first, owner) = ring.points[0];
        assert_eq!(
            ring.home(first),
            owner,
            "a hash equal to a point is that point's"
        );
    }

    #[test]
    fn modula_repeats_each_server_by_weight() {
        let mut ms = members(2);
        ms[0].weight = 2;
        let ring = Ring::new(Distribution::Modula, &ms);
        let homes: Vec<usize> = (0..6).map(|h| ring.home(h)).collect();
        assert_eq!(homes, vec![0, 0, 1, 0, 0, 1]);
    }

    #[test]
    fn the_walk_lists_every_server_once_home_first() {
        for kind in [Distribution::Ketama, Distribution::Modula] {
            let ring = Ring::new(kind, &members(5));
            for hash in [0, 12345, u32::MAX / 3, u32::MAX] {
                let walk: Vec<usize> = ring.walk(hash).collect();
                assert_eq!(walk[0], ring.home(hash));
                let mut sorted = walk.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, vec![0, 1, 2, 3, 4], "{kind:?}");
            }
        }
    }

    #[test]
    fn keys_spread_over_equal_servers() {
        let ring = Ring::new(Distribution::Ketama, &members(3));
        let mut counts = [0u32; 3];
        for i in 0..30_000 {
            counts[ring.home(crate::hash::fnv1a_64(format!("key:{i}").as_bytes()))] += 1;
        }
        for c in counts {
            assert!((7_000..13_000).contains(&c), "{counts:?}");
        }
    }
}
