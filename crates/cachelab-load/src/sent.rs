//! What was sent, counted: key and value sizes by power-of-two bucket and how often each
//! key was asked, so a report can show the workload a run really sent (a preset's
//! distributions, a trace's sizes and popularity) beside what it measured. Pure and
//! mergeable like the recorder it belongs to.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

/// Distinct keys counted per thread; past it, new keys are not counted (the report says
/// so), so a run over a huge key space stays in bounded memory.
pub const MAX_DISTINCT_KEYS: usize = 200_000;
/// The most per-key counts a report lists (the most asked first).
pub const TOP_KEYS: usize = 1000;

/// Bucket `b` holds sizes in `[2^b, 2^(b+1))`; bucket 0 also holds 0.
const BUCKETS: usize = 33;

fn bucket(size: u64) -> usize {
    (63 - size.max(1).leading_zeros() as usize).min(BUCKETS - 1)
}

/// Hashes a key's number (or a trace key's FNV hash) with one multiplication and a fold,
/// so both the bits a table indexes with and the ones it tags with are mixed. The default
/// SipHash cost about a twentieth of a pipelined request's CPU; these keys come from the
/// run itself, not from an adversary.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(self.0 ^ u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let x = (n ^ (n >> 32)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = x ^ (x >> 32);
    }
}

type KeyTable = HashMap<u64, u64, BuildHasherDefault<KeyHasher>>;

/// Key numbers below this are counted in a plain array of bytes (a run's key range
/// usually is), the others in a hash table. A byte per key keeps the array in the cache
/// (a profile found a word per key missing it on every request); a key asked
/// [`SPILLED`] times moves on to the table, its byte saying so.
const DENSE_KEYS: usize = MAX_DISTINCT_KEYS;
const SPILLED: u8 = u8::MAX;

#[derive(Debug, Clone)]
pub struct SentCounts {
    key_bytes: [u64; BUCKETS],
    value_bytes: [u64; BUCKETS],
    /// Counts of keys below [`DENSE_KEYS`], by number (grown as keys come); [`SPILLED`]:
    /// counted in `keys`.
    dense: Vec<u8>,
    keys: KeyTable,
    /// Distinct keys counted, in `dense` and `keys` together.
    distinct: usize,
    capped: bool,
}

impl Default for SentCounts {
    fn default() -> SentCounts {
        SentCounts {
            key_bytes: [0; BUCKETS],
            value_bytes: [0; BUCKETS],
            dense: Vec::new(),
            keys: KeyTable::default(),
            distinct: 0,
            capped: false,
        }
    }
}

impl SentCounts {
    /// A request for key `key` (its number, or a hash of its bytes) of `key_len` bytes,
    /// carrying a value of `value_len` bytes if it is a write.
    pub fn record(&mut self, key: u64, key_len: usize, value_len: Option<usize>) {
        self.key_bytes[bucket(key_len as u64)] += 1;
        if let Some(len) = value_len {
            self.value_bytes[bucket(len as u64)] += 1;
        }
        if key < DENSE_KEYS as u64 {
            let i = key as usize;
            if i >= self.dense.len() {
                self.grow(i);
            }
            let count = self.dense[i];
            if count == 0 {
                if self.distinct >= MAX_DISTINCT_KEYS {
                    self.capped = true;
                    return;
                }
                self.distinct += 1;
            }
            if count < SPILLED - 1 {
                self.dense[i] = count + 1;
            } else {
                self.dense[i] = SPILLED;
                *self.keys.entry(key).or_insert(u64::from(count)) += 1;
            }
        } else if let Some(count) = self.keys.get_mut(&key) {
            *count += 1;
        } else if self.distinct < MAX_DISTINCT_KEYS {
            self.keys.insert(key, 1);
            self.distinct += 1;
        } else {
            self.capped = true;
        }
    }

    pub fn merge(&mut self, other: &SentCounts) {
        for (mine, theirs) in self.key_bytes.iter_mut().zip(&other.key_bytes) {
            *mine += theirs;
        }
        for (mine, theirs) in self.value_bytes.iter_mut().zip(&other.value_bytes) {
            *mine += theirs;
        }
        for (i, theirs) in other.dense.iter().enumerate() {
            if *theirs > 0 {
                self.add_dense(i, other.dense_count(i));
            }
        }
        for (key, count) in &other.keys {
            if other.dense.get(*key as usize) == Some(&SPILLED) && *key < DENSE_KEYS as u64 {
                continue; // merged with the array above
            }
            let mine = self.keys.entry(*key).or_default();
            self.distinct += usize::from(*mine == 0);
            *mine += count;
        }
        self.capped |= other.capped;
    }

    fn grow(&mut self, i: usize) {
        self.dense
            .resize((i + 1).next_power_of_two().min(DENSE_KEYS), 0);
    }

    /// How often key `i` of the array was asked.
    fn dense_count(&self, i: usize) -> u64 {
        match self.dense[i] {
            SPILLED => self.keys.get(&(i as u64)).copied().unwrap_or(0),
            n => u64::from(n),
        }
    }

    /// `n` more requests for key `i` of the array (another thread's, merged).
    fn add_dense(&mut self, i: usize, n: u64) {
        if i >= self.dense.len() {
            self.grow(i);
        }
        self.distinct += usize::from(self.dense[i] == 0);
        let total = self.dense_count(i) + n;
        if total < u64::from(SPILLED) {
            self.dense[i] = total as u8;
        } else {
            self.dense[i] = SPILLED;
            self.keys.insert(i as u64, total);
        }
    }

    pub fn report(&self) -> SentReport {
        let buckets = |counts: &[u64; BUCKETS]| -> Vec<SizeBucket> {
            counts
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(b, n)| SizeBucket {
                    from: if b == 0 { 0 } else { 1 << b },
                    to: (1u64 << (b + 1)) - 1,
                    count: *n,
                })
                .collect()
        };
        let mut top: Vec<u64> = self
            .dense
            .iter()
            .filter(|n| **n > 0 && **n < SPILLED)
            .map(|n| u64::from(*n))
            .chain(self.keys.values().copied())
            .collect();
        top.sort_unstable_by(|a, b| b.cmp(a));
        top.truncate(TOP_KEYS);
        SentReport {
            key_bytes: buckets(&self.key_bytes),
            value_bytes: buckets(&self.value_bytes),
            keys: KeyCounts {
                distinct: self.distinct as u64,
                capped: self.capped,
                top,
            },
        }
    }
}

/// The report's `sent` object.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SentReport {
    /// Requests by the size of their (first) key.
    pub key_bytes: Vec<SizeBucket>,
    /// Writes by the size of their value.
    pub value_bytes: Vec<SizeBucket>,
    pub keys: KeyCounts,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SizeBucket {
    pub from: u64,
    pub to: u64,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KeyCounts {
    /// Keys asked at least once (per thread at most [`MAX_DISTINCT_KEYS`], summed).
    pub distinct: u64,
    /// Some thread saw more distinct keys than it counts: `top` and `distinct` are then
    /// lower bounds.
    pub capped: bool,
    /// How often each of the most asked keys was asked, most first.
    pub top: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_in_power_of_two_buckets() {
        let mut c = SentCounts::default();
        for (len, value) in [(0, None), (1, Some(64)), (3, Some(127)), (8, Some(128))] {
            c.record(len as u64, len, value);
        }
        let r = c.report();
        let spans: Vec<(u64, u64, u64)> = r
            .key_bytes
            .iter()
            .map(|b| (b.from, b.to, b.count))
            .collect();
        assert_eq!(spans, [(0, 1, 2), (2, 3, 1), (8, 15, 1)]);
        let values: Vec<(u64, u64)> = r.value_bytes.iter().map(|b| (b.from, b.count)).collect();
        assert_eq!(values, [(64, 2), (128, 1)]);
    }

    #[test]
    fn keys_are_counted_merged_and_ranked() {
        // Small key numbers are counted in the array, large ones (trace keys' hashes) in
        // the table: the same counts either way.
        for base in [0, u64::MAX / 2] {
            let (mut a, mut b) = (SentCounts::default(), SentCounts::default());
            for key in [1, 1, 1, 2, 2, 3] {
                a.record(base + key, 4, None);
            }
            b.record(base + 3, 4, None);
            b.record(base + 3, 4, None);
            b.record(base + 4, 4, None);
            a.merge(&b);
            let keys = a.report().keys;
            assert_eq!((keys.distinct, keys.capped), (4, false));
            // Key 1 three times, key 3 once here and twice there, key 2 twice, key 4 once.
            assert_eq!(keys.top, [3, 3, 2, 1]);
        }
    }

    #[test]
    fn a_key_asked_past_a_byte_moves_to_the_table_and_merges_exactly() {
        let (mut a, mut b) = (SentCounts::default(), SentCounts::default());
        for _ in 0..300 {
            a.record(7, 4, None);
        }
        for _ in 0..200 {
            b.record(7, 4, None);
        }
        b.record(9, 4, None);
        let mut c = SentCounts::default();
        for _ in 0..100 {
            c.record(7, 4, None);
        }
        assert_eq!(a.report().keys.top, [300]);
        a.merge(&b);
        assert_eq!(a.report().keys.top, [500, 1]);
        c.merge(&a);
        assert_eq!(c.report().keys.top, [600, 1]);
        assert_eq!(c.report().keys.distinct, 2);
    }

    #[test]
    fn past_the_cap_new_keys_are_not_counted_and_the_report_says_so() {
        let mut c = SentCounts::default();
        for key in 0..(MAX_DISTINCT_KEYS as u64 + 10) {
            c.record(key, 8, None);
        }
        c.record(0, 8, None);
        let keys = c.report().keys;
        assert_eq!(keys.distinct, MAX_DISTINCT_KEYS as u64);
        assert!(keys.capped);
        // The same past the array, in the table.
        let mut c = SentCounts::default();
        for key in 0..(MAX_DISTINCT_KEYS as u64 + 10) {
            c.record(u64::MAX - key, 8, None);
        }
        assert_eq!(c.report().keys.distinct, MAX_DISTINCT_KEYS as u64);
        assert!(c.report().keys.capped);
        assert_eq!(keys.top[0], 2, "known keys are still counted");
        assert_eq!(keys.top.len(), TOP_KEYS);
    }
}
