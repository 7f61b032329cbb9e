//! Value sizes and expiry times of SETs, with memtier_benchmark's options (`--data-size`,
//! `--data-size-range`, `--data-size-pattern`, `--data-size-list`, `--expiry-range`) and
//! its semantics, read in its obj_gen.cpp and config_types.cpp; and sizes and expiry
//! times drawn from a distribution (`--data-size-dist`, `--expiry-dist`). Pure.

use rand::{Rng, RngExt};

use crate::dist::Dist;
use crate::keys::KeyRange;

/// The largest value size any option may ask for: Redis's largest string (512 MiB).
/// memcached's own limit is its `-I` (1 MiB by default, 1 GiB at most); a larger request
/// would only make the load generator try to allocate its value buffer and abort.
pub const MAX_VALUE_SIZE: u64 = 512 << 20;

/// The default bound of sizes drawn from a distribution (`--max-item-size`): a value
/// this large fits memcached's default 1 MiB item together with its key and header.
pub const DEFAULT_MAX_ITEM_SIZE: u64 = 1_000_000;

/// memcached reads an exptime above this many seconds (30 days) as a Unix time, so a
/// larger relative expiry would expire at once.
pub const MEMCACHED_MAX_RELATIVE_EXPTIME: u32 = 60 * 60 * 24 * 30;

/// How `--data-size-range` chooses a size (`--data-size-pattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizePattern {
    /// R: uniform over the range, independently for every SET.
    Random,
    /// S: a function of the key, rising linearly from the smallest size at `--key-minimum`
    /// to the largest at `--key-maximum`, so every write of a key has the same size.
    Sequential,
}

impl SizePattern {
    pub fn letter(self) -> char {
        match self {
            SizePattern::Random => 'R',
            SizePattern::Sequential => 'S',
        }
    }
}

/// One entry of `--data-size-list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeWeight {
    pub size: usize,
    pub weight: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DataSize {
    Fixed(usize),
    /// Inclusive range.
    Range {
        min: usize,
        max: usize,
        pattern: SizePattern,
    },
    /// memtier's weighted list. Not a random draw: each connection sends the first size
    /// `weight` times in a row, then the second size its weight times, and so on, round
    /// and round (memtier's `config_weight_list::get_next_size`; every client has its own
    /// copy of the list, starting at its first entry). Over any whole number of rounds
    /// the sizes' shares are exactly their weights' shares.
    List(Vec<SizeWeight>),
    /// Drawn from a distribution for every SET, rounded and clamped to `0..=max`.
    Dist {
        dist: Dist,
        /// The distribution as it was written, for the report.
        spec: String,
        max: usize,
    },
}

impl DataSize {
    pub fn min(&self) -> usize {
        match self {
            DataSize::Fixed(n) | DataSize::Range { min: n, .. } => *n,
            DataSize::List(list) => list.iter().map(|w| w.size).min().unwrap_or(0),
            DataSize::Dist { dist, max, .. } => dist.clamped_min(0, *max as u64) as usize,
        }
    }

    pub fn max(&self) -> usize {
        match self {
            DataSize::Fixed(n) | DataSize::Range { max: n, .. } => *n,
            DataSize::List(list) => list.iter().map(|w| w.size).max().unwrap_or(0),
            DataSize::Dist { dist, max, .. } => dist.clamped_max(0, *max as u64) as usize,
        }
    }
}

/// `MIN-MAX` with whole numbers, `MIN <= MAX`.
pub fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let bad = || format!("{text:?} is not MIN-MAX");
    let (lo, hi) = text.split_once('-').ok_or_else(bad)?;
    let lo: u64 = lo.trim().parse().map_err(|_| bad())?;
    let hi: u64 = hi.trim().parse().map_err(|_| bad())?;
    if lo > hi {
        return Err(format!("minimum {lo} is above maximum {hi}"));
    }
    Ok((lo, hi))
}

/// `size1:weight1,size2:weight2,...` with whole numbers; some weight must be positive
/// (entries of weight 0 are never sent, as in memtier).
pub fn parse_size_list(text: &str) -> Result<Vec<SizeWeight>, String> {
    let list = text
        .split(',')
        .map(|entry| {
            let bad = || format!("{entry:?} in {text:?} is not SIZE:WEIGHT");
            let (size, weight) = entry.split_once(':').ok_or_else(bad)?;
            Ok(SizeWeight {
                size: size.trim().parse().map_err(|_| bad())?,
                weight: weight.trim().parse().map_err(|_| bad())?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if list.iter().all(|w| w.weight == 0) {
        return Err("every weight is 0: no size would ever be sent".into());
    }
    Ok(list)
}

/// One connection's value sizes.
#[derive(Debug, Clone)]
pub struct SizeGen {
    sizes: DataSize,
    keys: KeyRange,
    /// `List`: the entry being sent and how many times it has been.
    entry: usize,
    sent: u32,
}

impl SizeGen {
    /// `keys` is the whole key range (the S pattern's scale).
    pub fn new(sizes: DataSize, keys: KeyRange) -> SizeGen {
        SizeGen {
            sizes,
            keys,
            entry: 0,
            sent: 0,
        }
    }

    /// The size of the value written to key number `key`.
    pub fn next<R: Rng + ?Sized>(&mut self, key: u64, rng: &mut R) -> usize {
        match &self.sizes {
            DataSize::Fixed(n) => *n,
            DataSize::Range {
                min,
                max,
                pattern: SizePattern::Random,
            } => rng.random_range(*min..=*max),
            DataSize::Range {
                min,
                max,
                pattern: SizePattern::Sequential,
            } => {
                // memtier: min + (max - min) * (key - key_min) / (key_max - key_min),
                // truncated (obj_gen.cpp, object_generator::get_value).
                let span = self.keys.max - self.keys.min;
                if span == 0 {
                    return *min;
                }
                let a =
                    (key.clamp(self.keys.min, self.keys.max) - self.keys.min) as f64 / span as f64;
                *min + ((max - min) as f64 * a) as usize
            }
            DataSize::List(list) => {
                while self.sent >= list[self.entry].weight {
                    self.entry = (self.entry + 1) % list.len();
                    self.sent = 0;
                }
                self.sent += 1;
                list[self.entry].size
            }
            DataSize::Dist { dist, max, .. } => dist.sample_clamped(rng, 0, *max as u64) as usize,
        }
    }
}

/// `--expiry-range`: every SET's expiry drawn uniformly from `min..=max` seconds
/// (memtier's `object_generator::get_expiry`); an expiry of 0 means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpiryRange {
    pub min: u32,
    pub max: u32,
}

impl ExpiryRange {
    /// `MIN-MAX` seconds with `MAX > 0` (memtier refuses `0-0`: it means no expiry).
    pub fn parse(text: &str) -> Result<ExpiryRange, String> {
        let (min, max) = parse_range(text)?;
        let fits = |n: u64| u32::try_from(n).map_err(|_| format!("{n} s is too long"));
        let range = ExpiryRange {
            min: fits(min)?,
            max: fits(max)?,
        };
        if range.max == 0 {
            return Err("0-0 sets no expiry: leave the option out".into());
        }
        Ok(range)
    }

    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        rng.random_range(self.min..=self.max)
    }
}

/// The expiry of every SET: memtier's uniform range, or a distribution of seconds.
#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    Range(ExpiryRange),
    /// Rounded and clamped to `0..=max` seconds (0: no expiry).
    Dist {
        dist: Dist,
        spec: String,
        max: u32,
    },
}

impl Expiry {
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        match self {
            Expiry::Range(range) => range.draw(rng),
            Expiry::Dist { dist, max, .. } => dist.sample_clamped(rng, 0, u64::from(*max)) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn rng() -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(7)
    }

    fn list(text: &str) -> DataSize {
        DataSize::List(parse_size_list(text).unwrap())
    }

    #[test]
    fn a_size_list_sends_each_size_its_weight_in_a_row_round_and_round() {
        let mut g = SizeGen::new(list("10:2,20:1,30:3"), KeyRange::new(0, 9));
        let sizes: Vec<usize> = (0..12).map(|k| g.next(k, &mut rng())).collect();
        assert_eq!(sizes, [10, 10, 20, 30, 30, 30, 10, 10, 20, 30, 30, 30]);
    }

    #[test]
    fn a_size_lists_shares_are_its_weights_over_whole_rounds() {
        let mut g = SizeGen::new(list("32:70,1024:25,65536:5"), KeyRange::new(0, 9));
        let mut r = rng();
        let mut counts = std::collections::BTreeMap::new();
        for k in 0..100_000 {
            *counts.entry(g.next(k, &mut r)).or_insert(0) += 1;
        }
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            [(32, 70_000), (1024, 25_000), (65536, 5_000)]
        );
    }

    #[test]
    fn a_size_of_weight_zero_is_never_sent() {
        let mut g = SizeGen::new(list("1:0,2:1,3:0,4:2"), KeyRange::new(0, 9));
        let sizes: Vec<usize> = (0..6).map(|k| g.next(k, &mut rng())).collect();
        assert_eq!(sizes, [2, 4, 4, 2, 4, 4]);
    }

    #[test]
    fn a_size_list_must_be_size_weight_pairs_with_some_weight() {
        assert_eq!(
            parse_size_list("32:1, 64:3").unwrap(),
            [
                SizeWeight {
                    size: 32,
                    weight: 1
                },
                SizeWeight {
                    size: 64,
                    weight: 3
                }
            ]
        );
        for bad in ["", "32", "32:", "32:1,", "a:1", "32:1:2", "32:0,64:0"] {
            assert!(parse_size_list(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_random_range_draws_every_size_about_equally() {
        let sizes = DataSize::Range {
            min: 10,
            max: 19,
            pattern: SizePattern::Random,
        };
        let mut g = SizeGen::new(sizes, KeyRange::new(0, 9));
        let mut r = rng();
        let mut counts = [0u32; 10];
        let n = 100_000;
        for k in 0..n {
            counts[g.next(k, &mut r) - 10] += 1;
        }
        // Each size's count is binomial(n, 1/10): 5 standard deviations is ~474.
        let sd = (n as f64 * 0.1 * 0.9).sqrt();
        for c in counts {
            assert!(
                (f64::from(c) - n as f64 / 10.0).abs() < 5.0 * sd,
                "{counts:?}"
            );
        }
    }

    #[test]
    fn the_sequential_size_pattern_rises_with_the_key_as_memtier_computes_it() {
        let sizes = DataSize::Range {
            min: 100,
            max: 200,
            pattern: SizePattern::Sequential,
        };
        let mut g = SizeGen::new(sizes.clone(), KeyRange::new(1, 1001));
        let mut r = rng();
        assert_eq!(g.next(1, &mut r), 100);
        assert_eq!(g.next(501, &mut r), 150);
        assert_eq!(g.next(510, &mut r), 150, "0.509 x 100 truncates to 50");
        assert_eq!(g.next(511, &mut r), 151);
        assert_eq!(g.next(1001, &mut r), 200);
        let mut one_key = SizeGen::new(sizes, KeyRange::new(5, 5));
        assert_eq!(one_key.next(5, &mut r), 100);
    }

    #[test]
    fn drawn_sizes_and_expiries_stay_within_their_bounds() {
        let dist = crate::dist::parse("normal:mean=100,sd=400").unwrap();
        let sizes = DataSize::Dist {
            dist: dist.clone(),
            spec: String::new(),
            max: 300,
        };
        assert_eq!((sizes.min(), sizes.max()), (0, 300));
        let mut g = SizeGen::new(sizes, KeyRange::new(0, 9));
        let mut r = rng();
        let drawn: Vec<usize> = (0..10_000).map(|k| g.next(k, &mut r)).collect();
        assert!(drawn.iter().all(|s| *s <= 300));
        assert!(
            drawn.contains(&0) && drawn.contains(&300),
            "both bounds are reached"
        );
        let e = Expiry::Dist {
            dist,
            spec: String::new(),
            max: 200,
        };
        assert!((0..1000).all(|_| e.draw(&mut r) <= 200));
    }

    #[test]
    fn expiry_ranges_are_inclusive_and_not_empty() {
        let e = ExpiryRange::parse("3-5").unwrap();
        let mut r = rng();
        let drawn: std::collections::BTreeSet<u32> = (0..1000).map(|_| e.draw(&mut r)).collect();
        assert_eq!(drawn, [3, 4, 5].into());
        assert_eq!(
            ExpiryRange::parse("0-10").unwrap(),
            ExpiryRange { min: 0, max: 10 }
        );
        for bad in ["0-0", "5-3", "5", "-5", "1-99999999999"] {
            assert!(ExpiryRange::parse(bad).is_err(), "{bad:?}");
        }
    }
}
