//! Key choice: which key number the next request uses, for each of memtier's patterns.
//! Pure: every generator draws from an RNG its caller owns, so a seed makes a run
//! repeatable and tests check shapes on seeded samples.

use rand::Rng;
use rand_distr::{Distribution, Normal, Uniform, Zipf};

use crate::dist::Dist;

/// An inclusive range of key numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRange {
    pub min: u64,
    pub max: u64,
}

impl KeyRange {
    pub fn new(min: u64, max: u64) -> KeyRange {
        assert!(min <= max, "key range {min}..={max} is empty");
        KeyRange { min, max }
    }

    /// Number of keys (saturating at u64::MAX for the whole u64 range).
    pub fn len(&self) -> u64 {
        (self.max - self.min).saturating_add(1)
    }

    /// Never true: a range holds at least one key.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Client `index`'s part when the range is split over `clients`: consecutive parts
    /// whose sizes differ by at most one, together covering every key exactly once.
    pub fn part(&self, index: usize, clients: usize) -> KeyRange {
        assert!(index < clients && clients as u64 <= self.len());
        let len = u128::from(self.len());
        let start = len * index as u128 / clients as u128;
        let end = len * (index as u128 + 1) / clients as u128;
        KeyRange::new(self.min + start as u64, self.min + end as u64 - 1)
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyPattern {
    /// R: every key equally likely.
    Uniform,
    /// G: a normal distribution rounded to whole keys; draws outside the range are
    /// redrawn (memtier's behaviour), so the shape is a truncated normal.
    Gaussian { median: f64, stddev: f64 },
    /// Z: the key of rank r (r = 1 is `min`) with probability proportional to 1/r^exponent.
    Zipf { exponent: f64 },
    /// S: min, min+1, ..., max, then around again; every client walks the whole range.
    Sequential,
    /// P: like S within the client's own part of the range (see [`KeyRange::part`]).
    Parallel,
}

impl KeyPattern {
    pub fn letter(&self) -> char {
        match self {
            KeyPattern::Uniform => 'R',
            KeyPattern::Gaussian { .. } => 'G',
            KeyPattern::Zipf { .. } => 'Z',
            KeyPattern::Sequential => 'S',
            KeyPattern::Parallel => 'P',
        }
    }
}

/// Redraws of an out-of-range gaussian sample before it is clamped (only reachable with a
/// median near an edge and a huge deviation).
const GAUSSIAN_REDRAWS: usize = 64;

/// One client's key generator for one pattern.
#[derive(Debug, Clone)]
pub struct KeyGen {
    kind: Kind,
    /// The keys this client is meant to cover (its part for P, the whole range otherwise).
    share: KeyRange,
}

#[derive(Debug, Clone)]
enum Kind {
    Uniform(Uniform<u64>),
    Gaussian(Normal<f64>, KeyRange),
    Zipf(Zipf<f64>, u64),
    Walk {
        range: KeyRange,
        next: u64,
    },
    /// `--key-dist`: a draw from [lo, hi] mapped linearly onto the range.
    Drawn {
        dist: Dist,
        lo: f64,
        hi: f64,
        range: KeyRange,
    },
}

impl KeyGen {
    /// The generator for client `client` of `clients` (the index matters only for P).
    pub fn new(pattern: KeyPattern, range: KeyRange, client: usize, clients: usize) -> KeyGen {
        let share = match pattern {
            KeyPattern::Parallel => range.part(client, clients),
            _ => range,
        };
        let kind = match pattern {
            KeyPattern::Uniform => {
                Kind::Uniform(Uniform::new_inclusive(range.min, range.max).expect("min <= max"))
            }
            KeyPattern::Gaussian { median, stddev } => Kind::Gaussian(
                Normal::new(median, stddev).expect("validated stddev"),
                range,
            ),
            KeyPattern::Zipf { exponent } => Kind::Zipf(
                Zipf::new(range.len() as f64, exponent).expect("validated exponent"),
                range.min,
            ),
            KeyPattern::Sequential | KeyPattern::Parallel => Kind::Walk {
                range: share,
                next: share.min,
            },
        };
        KeyGen { kind, share }
    }

    /// With `dist` (`--key-dist`, a distribution of bounded support [lo, hi]), the R
    /// pattern draws from it instead of uniformly: a draw x is key
    /// `min + floor((x - lo) / (hi - lo) x len)`, so a popularity table's first ranks are
    /// the lowest key numbers. The other patterns are unchanged.
    pub fn drawn_by(mut self, dist: Option<&Dist>) -> KeyGen {
        if let (Some(dist), Kind::Uniform(_)) = (dist, &self.kind) {
            let (lo, hi) = dist.support();
            self.kind = Kind::Drawn {
                dist: dist.clone(),
                lo,
                hi,
                range: self.share,
            };
        }
        self
    }

    /// Requests `--requests=allkeys` makes this client send: its part of the range for P
    /// (so that all clients together write every key exactly once), the range otherwise.
    pub fn allkeys_count(&self) -> u64 {
        self.share.len()
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        match &mut self.kind {
            Kind::Uniform(u) => u.sample(rng),
            Kind::Gaussian(normal, range) => {
                let (lo, hi) = (range.min as f64, range.max as f64);
                let mut x = normal.sample(rng).round();
                for _ in 0..GAUSSIAN_REDRAWS {
                    if x >= lo && x <= hi {
                        break;
                    }
                    x = normal.sample(rng).round();
                }
                x.clamp(lo, hi) as u64
            }
            Kind::Zipf(zipf, min) => *min + zipf.sample(rng) as u64 - 1,
            Kind::Drawn {
                dist,
                lo,
                hi,
                range,
            } => {
                let at = ((dist.sample(rng) - *lo) / (*hi - *lo)).clamp(0.0, 1.0);
                let offset = (at * range.len() as f64) as u64;
                range.min + offset.min(range.len() - 1)
            }
            Kind::Walk { range, next } => {
                let key = *next;
                *next = if key == range.max { range.min } else { key + 1 };
                key
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn rng() -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(42)
    }

    fn counts(pattern: KeyPattern, range: KeyRange, samples: usize) -> Vec<u64> {
        let mut gen = KeyGen::new(pattern, range, 0, 1);
        let mut rng = rng();
        let mut counts = vec![0u64; range.len() as usize];
        for _ in 0..samples {
            let k = gen.next(&mut rng);
            assert!(k >= range.min && k <= range.max, "{k} outside the range");
            counts[(k - range.min) as usize] += 1;
        }
        counts
    }

    #[test]
    fn uniform_covers_the_range_evenly() {
        // 200 keys x 2000 expected draws each: chi-square with 199 degrees of freedom
        // stays under 280 with probability > 0.999; every key is drawn within 20%.
        let range = KeyRange::new(1000, 1199);
        let c = counts(KeyPattern::Uniform, range, 400_000);
        let expected = 2000.0;
        let chi2: f64 = c
            .iter()
            .map(|&n| (n as f64 - expected).powi(2) / expected)
            .sum();
        assert!(chi2 < 280.0, "chi-square {chi2}");
        assert!(
            c.iter()
                .all(|&n| (n as f64 - expected).abs() < 0.2 * expected),
            "{c:?}"
        );
    }

    #[test]
    fn gaussian_has_the_asked_median_and_stddev() {
        // 100k draws: the sample median's standard error is 1.25 sd/sqrt(n) = 200 and the
        // sample deviation's is sd/sqrt(2n) = 112; tolerances are 5 standard errors.
        let range = KeyRange::new(0, 999_999);
        let (median, stddev) = (300_000.0, 50_000.0);
        let mut gen = KeyGen::new(KeyPattern::Gaussian { median, stddev }, range, 0, 1);
        let mut rng = rng();
        let mut xs: Vec<f64> = (0..100_000).map(|_| gen.next(&mut rng) as f64).collect();
        xs.sort_by(f64::total_cmp);
        let sample_median = xs[xs.len() / 2];
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd =
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt();
        assert!(
            (sample_median - median).abs() < 1000.0,
            "median {sample_median}"
        );
        assert!((sd - stddev).abs() < 560.0, "stddev {sd}");
    }

    #[test]
    fn gaussian_draws_stay_inside_the_range() {
        let range = KeyRange::new(10, 20);
        let c = counts(
            KeyPattern::Gaussian {
                median: 10.0,
                stddev: 100.0,
            },
            range,
            10_000,
        );
        assert_eq!(c.iter().sum::<u64>(), 10_000);
    }

    /// Least-squares slope of log(frequency) against log(rank) over the top ranks.
    fn rank_frequency_slope(counts: &[u64], ranks: usize) -> f64 {
        let points: Vec<(f64, f64)> = counts[..ranks]
            .iter()
            .enumerate()
            .map(|(i, &n)| (((i + 1) as f64).ln(), (n as f64).ln()))
            .collect();
        let n = points.len() as f64;
        let (mx, my) = (
            points.iter().map(|p| p.0).sum::<f64>() / n,
            points.iter().map(|p| p.1).sum::<f64>() / n,
        );
        let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
        sxy / sxx
    }

    #[test]
    fn zipf_rank_frequency_follows_the_exponent() {
        // Over the 50 most frequent ranks of 10 000 keys, the log-log slope is -s within 0.05,
        // and the top key's share matches 1/H(n, s) within 3%.
        let range = KeyRange::new(0, 9_999);
        for s in [0.8, 1.0, 1.5] {
            let c = counts(KeyPattern::Zipf { exponent: s }, range, 1_000_000);
            let slope = rank_frequency_slope(&c, 50);
            assert!((slope + s).abs() < 0.05, "exponent {s}: slope {slope}");
            let harmonic: f64 = (1..=10_000).map(|r| (r as f64).powf(-s)).sum();
            let top_share = c[0] as f64 / 1e6;
            assert!(
                (top_share * harmonic - 1.0).abs() < 0.03,
                "exponent {s}: top share {top_share}"
            );
        }
    }

    #[test]
    fn sequential_walks_the_range_in_order_and_wraps() {
        let mut gen = KeyGen::new(KeyPattern::Sequential, KeyRange::new(5, 7), 3, 4);
        let mut rng = rng();
        let keys: Vec<u64> = (0..7).map(|_| gen.next(&mut rng)).collect();
        assert_eq!(keys, vec![5, 6, 7, 5, 6, 7, 5]);
        assert_eq!(gen.allkeys_count(), 3);
    }

    #[test]
    fn parallel_parts_cover_every_key_exactly_once() {
        let range = KeyRange::new(3, 1002);
        let clients = 7;
        let mut seen = vec![0u32; 1000];
        let mut rng = rng();
        for client in 0..clients {
            let mut gen = KeyGen::new(KeyPattern::Parallel, range, client, clients);
            let n = gen.allkeys_count();
            assert!(n == 142 || n == 143, "part of {n} keys");
            for _ in 0..n {
                seen[(gen.next(&mut rng) - 3) as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn the_same_seed_gives_the_same_keys() {
        let range = KeyRange::new(0, 1_000_000);
        let draw = || {
            let mut gen = KeyGen::new(KeyPattern::Zipf { exponent: 1.0 }, range, 0, 1);
            let mut rng = rng();
            (0..100).map(|_| gen.next(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(), draw());
    }

    #[test]
    fn a_popularity_table_maps_its_ranks_onto_the_key_range() {
        // Two buckets: key ranks 0..1 (weight 1) and 1..10 (weight 1), so over keys
        // 100..=199 half the draws are keys 100..=109 (the first tenth), half the rest.
        let table = crate::dist::parse("uniform:min=0,max=1").unwrap();
        let pop =
            crate::dist::Empirical::piecewise(vec![0.0, 1.0, 10.0], &[1.0, 1.0], "p").unwrap();
        let pop = Dist::Empirical(std::sync::Arc::new(pop));
        let range = KeyRange::new(100, 199);
        let mut gen = KeyGen::new(KeyPattern::Uniform, range, 0, 1).drawn_by(Some(&pop));
        let mut r = rng();
        let draws: Vec<u64> = (0..20_000).map(|_| gen.next(&mut r)).collect();
        assert!(draws.iter().all(|k| range.min <= *k && *k <= range.max));
        let first_tenth = draws.iter().filter(|k| **k < 110).count();
        assert!((first_tenth as i64 - 10_000).abs() < 400, "{first_tenth}");
        // Other patterns ignore it.
        let mut walk = KeyGen::new(KeyPattern::Sequential, range, 0, 1).drawn_by(Some(&table));
        assert_eq!((walk.next(&mut r), walk.next(&mut r)), (100, 101));
    }

    #[test]
    fn the_full_u64_range_does_not_overflow() {
        let range = KeyRange::new(0, u64::MAX);
        assert_eq!(range.len(), u64::MAX);
        let mut gen = KeyGen::new(KeyPattern::Uniform, range, 0, 1);
        gen.next(&mut rng());
    }
}
