//! Key sizes drawn from a distribution (`--key-size-dist`): a key is the prefix, then
//! zeros, then its number, as long as the size drawn for that number. The size is a
//! function of the key number and the run's seed, not of the order of draws, so the same
//! key has the same size in every request of every connection (mutilate's KeyGenerator
//! hashes the key index for the same reason). Pure.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::dist::Dist;

/// memcached's longest key; kept for Redis too, so a preset sends the same keys to both.
pub const MAX_KEY_SIZE: usize = 250;

#[derive(Debug, Clone, PartialEq)]
pub struct KeySize {
    pub dist: Dist,
    /// The distribution as it was written, for the report.
    pub spec: String,
}

/// A 64-bit mix (splitmix64's finalizer), so neighbouring key numbers get unrelated seeds.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl KeySize {
    /// The size of key `number` under `seed`, at least `shortest` (the prefix and the
    /// number's digits) and at most [`MAX_KEY_SIZE`].
    pub fn size_of(&self, number: u64, seed: u64, shortest: usize) -> usize {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix(number ^ mix(seed)));
        let max = MAX_KEY_SIZE.max(shortest);
        self.dist
            .sample_clamped(&mut rng, shortest as u64, max as u64) as usize
    }
}

/// Appends `prefix`, zeros and `number` to `out`, `size` bytes in all (or fewer zeros:
/// never shorter than the prefix and the digits).
pub fn push_padded(out: &mut Vec<u8>, prefix: &[u8], number: u64, size: usize) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(number).as_bytes();
    out.extend_from_slice(prefix);
    let zeros = size.saturating_sub(prefix.len() + digits.len());
    out.resize(out.len() + zeros, b'0');
    out.extend_from_slice(digits);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gev() -> KeySize {
        KeySize {
            dist: crate::dist::builtin::fb_key(),
            spec: "fb_key".into(),
        }
    }

    #[test]
    fn a_key_has_the_same_size_whatever_the_order_of_requests() {
        let k = gev();
        let forward: Vec<usize> = (0..1000).map(|n| k.size_of(n, 7, 2)).collect();
        let backward: Vec<usize> = (0..1000).rev().map(|n| k.size_of(n, 7, 2)).collect();
        assert_eq!(forward, backward.into_iter().rev().collect::<Vec<_>>());
        let other_seed: Vec<usize> = (0..1000).map(|n| k.size_of(n, 8, 2)).collect();
        assert_ne!(forward, other_seed);
    }

    #[test]
    fn sizes_over_many_keys_follow_the_distribution() {
        // fb_key's mean is 36.2 bytes (GEV mean), its sd about 11: 100 000 keys'
        // mean is within 0.2 of it (more than 5 standard errors).
        let k = gev();
        let n = 100_000u64;
        let mean = (0..n).map(|i| k.size_of(i, 1, 1) as f64).sum::<f64>() / n as f64;
        let want = k.dist.mean().unwrap();
        assert!(
            (mean - want).abs() < 0.2,
            "mean key size {mean}, expected {want}"
        );
    }

    #[test]
    fn sizes_stay_between_the_digits_and_memcacheds_limit() {
        let k = KeySize {
            dist: crate::dist::parse("uniform:min=0,max=1000").unwrap(),
            spec: String::new(),
        };
        for n in 0..1000 {
            let size = k.size_of(n, 3, 12);
            assert!((12..=MAX_KEY_SIZE).contains(&size), "{size}");
        }
    }

    #[test]
    fn keys_are_padded_with_zeros_between_prefix_and_number() {
        let mut out = Vec::new();
        push_padded(&mut out, b"k:", 42, 8);
        assert_eq!(out, b"k:000042");
        out.clear();
        push_padded(&mut out, b"k:", 123456, 3);
        assert_eq!(out, b"k:123456", "never shorter than prefix and digits");
    }

    /// The generator's keys, through the command line, for the cases below.
    fn generator(line: &str) -> crate::workload::Generator {
        use clap::Parser;
        let args = crate::args::Args::try_parse_from(
            std::iter::once("cachelab-load").chain(line.split_whitespace()),
        )
        .unwrap();
        let c = crate::config::Config::try_from(&args).unwrap();
        let w = &c.workload;
        let values = std::rc::Rc::new(crate::workload::Values::new(w.data_size.max(), false, 1));
        crate::workload::Generator::new(w, c.seed, 0, 1, values)
    }

    fn first_key(request: &[u8]) -> String {
        let line = std::str::from_utf8(request)
            .unwrap()
            .lines()
            .next()
            .unwrap()
            .to_string();
        line.split(' ').nth(1).unwrap().to_string()
    }

    #[test]
    fn sets_and_gets_of_a_key_carry_the_same_padded_key() {
        let mut g = generator(
            "-P memcache_text --key-prefix k: --key-maximum 50 --key-pattern S:S --ratio 1:1 \
             --key-size-dist uniform:min=3,max=40",
        );
        let mut sizes = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let (mut set, mut get) = (Vec::new(), Vec::new());
            g.compose(&mut set);
            g.compose(&mut get);
            let key = first_key(&set);
            assert_eq!(key, first_key(&get));
            assert!(key.starts_with("k:") && key.len() <= 40, "{key}");
            sizes.insert(key.len());
        }
        assert!(sizes.len() > 10, "sizes vary over keys: {sizes:?}");
    }

    #[test]
    fn lone_gets_ask_for_keys_never_set_and_each_once() {
        let mut g = generator(
            "-P memcache_text --key-prefix k: --key-maximum 99 --ratio 1:4 --lone-get-share 0.5",
        );
        let (mut lone, mut seen) = (0, std::collections::BTreeSet::new());
        for _ in 0..5000 {
            let mut out = Vec::new();
            let sent = g.compose(&mut out);
            let number: u64 = first_key(&out)[2..].parse().unwrap();
            if sent.op == crate::workload::Op::Set {
                assert!(number <= 99, "sets stay in the key range");
            } else if number > 99 {
                lone += 1;
                assert!(seen.insert(number), "key {number} asked twice");
            }
        }
        // 4000 GETs, half of them lone: binomial sd 32, so within 160.
        assert!((lone as i64 - 2000).abs() < 160, "{lone} lone gets of 4000");
    }
}
