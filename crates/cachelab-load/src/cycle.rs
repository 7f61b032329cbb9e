//! The set:get cycle of one connection: which operation comes next and how many keys a
//! GET asks for. Pure.
//!
//! Two ways to ask for several keys per GET:
//! - [`GetKeys::Every`] (`--multiget-keys N`, ours): every GET asks for N keys and counts
//!   once toward the ratio, so `--ratio=1:10 --multiget-keys=3` sends 1 SET then 10
//!   3-key GETs.
//! - [`GetKeys::Memtier`] (`--multi-key-get N`, memtier_benchmark's): the keys count toward
//!   the ratio. After the cycle's SETs, each GET asks for `min(N, G - g)` keys, where `g`
//!   counts the keys asked so far in the cycle, and `g` grows by N; when `g >= G` the
//!   cycle starts again. `--ratio=1:10 --multi-key-get=3` sends SET, 3 keys, 3 keys,
//!   3 keys, 1 key; `--ratio=0:1` sends 1-key GETs whatever N. (memtier's
//!   `client::create_request` and `client::create_mget_request` in client.cpp.)

/// `--ratio S:G`: sets and gets are issued in repeating runs of `sets` then `gets` on each
/// connection, so counts follow the ratio exactly rather than on average.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    pub sets: u32,
    pub gets: u32,
}

/// How many keys the GETs of a cycle ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetKeys {
    /// Every GET asks for this many keys (1 = plain GETs).
    Every(usize),
    /// memtier's `--multi-key-get`: up to this many keys, counted toward the ratio.
    Memtier(usize),
}

impl GetKeys {
    /// The most keys one GET can ask for.
    pub fn max(self) -> usize {
        match self {
            GetKeys::Every(n) | GetKeys::Memtier(n) => n,
        }
    }
}

/// The next request's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Set,
    Get { keys: usize },
}

/// One connection's position in the cycle.
#[derive(Debug, Clone)]
pub struct OpCycle {
    ratio: Ratio,
    get_keys: GetKeys,
    /// SETs sent in the current cycle.
    sets: u32,
    /// GETs (with [`GetKeys::Every`]) or keys (with [`GetKeys::Memtier`]) asked for in
    /// the current cycle.
    gets: u64,
}

impl OpCycle {
    /// `ratio` must not be 0:0 and `get_keys` must ask for at least one key (the
    /// configuration refuses both).
    pub fn new(ratio: Ratio, get_keys: GetKeys) -> OpCycle {
        assert!(
            ratio.sets > 0 || ratio.gets > 0,
            "a 0:0 ratio sends nothing"
        );
        assert!(get_keys.max() > 0, "a GET asks for at least one key");
        OpCycle {
            ratio,
            get_keys,
            sets: 0,
            gets: 0,
        }
    }

    pub fn next_step(&mut self) -> Step {
        loop {
            if self.sets < self.ratio.sets {
                self.sets += 1;
                return Step::Set;
            }
            let wanted = u64::from(self.ratio.gets);
            if self.gets < wanted {
                return match self.get_keys {
                    GetKeys::Every(keys) => {
                        self.gets += 1;
                        Step::Get { keys }
                    }
                    GetKeys::Memtier(n) => {
                        let keys = (wanted - self.gets).min(n as u64) as usize;
                        self.gets += n as u64;
                        Step::Get { keys }
                    }
                };
            }
            // Both counts are used up: the cycle starts again (memtier spends a call on
            // this reset and sends nothing in it; so do we, without the call).
            self.sets = 0;
            self.gets = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(sets: u32, gets: u32, get_keys: GetKeys, n: usize) -> Vec<Step> {
        let mut cycle = OpCycle::new(Ratio { sets, gets }, get_keys);
        (0..n).map(|_| cycle.next_step()).collect()
    }

    fn get(keys: usize) -> Step {
        Step::Get { keys }
    }

    #[test]
    fn memtier_multi_key_get_counts_keys_toward_the_ratio() {
        use Step::Set;
        assert_eq!(
            steps(1, 10, GetKeys::Memtier(3), 10),
            [
                Set,
                get(3),
                get(3),
                get(3),
                get(1),
                Set,
                get(3),
                get(3),
                get(3),
                get(1)
            ]
        );
    }

    #[test]
    fn memtier_multi_key_get_with_fewer_gets_than_keys_sends_one_key_gets() {
        assert_eq!(steps(0, 1, GetKeys::Memtier(3), 4), [get(1); 4]);
        assert_eq!(
            steps(2, 2, GetKeys::Memtier(5), 6),
            [Step::Set, Step::Set, get(2), Step::Set, Step::Set, get(2)]
        );
    }

    #[test]
    fn memtier_multi_key_get_that_divides_the_gets_sends_whole_multi_gets() {
        assert_eq!(
            steps(1, 6, GetKeys::Memtier(3), 6),
            [Step::Set, get(3), get(3), Step::Set, get(3), get(3)]
        );
        assert_eq!(steps(0, 4, GetKeys::Memtier(1), 3), [get(1); 3]);
    }

    #[test]
    fn every_get_asks_for_the_same_keys_and_counts_once() {
        let s = steps(1, 10, GetKeys::Every(3), 22);
        assert_eq!((s[0], s[11]), (Step::Set, Step::Set));
        assert_eq!(s.iter().filter(|s| **s == get(3)).count(), 20);
    }

    #[test]
    fn a_set_only_or_get_only_ratio_repeats_one_operation() {
        assert_eq!(steps(1, 0, GetKeys::Memtier(3), 3), [Step::Set; 3]);
        assert_eq!(steps(0, 3, GetKeys::Every(1), 3), [get(1); 3]);
    }

    #[test]
    fn keys_asked_per_cycle_equal_the_ratios_gets() {
        for (gets, n) in [(10, 3), (7, 7), (7, 8), (100, 9), (1, 1)] {
            let mut cycle = OpCycle::new(Ratio { sets: 1, gets }, GetKeys::Memtier(n));
            assert_eq!(cycle.next_step(), Step::Set);
            let mut keys = 0;
            while let Step::Get { keys: k } = cycle.next_step() {
                keys += k;
            }
            assert_eq!(keys, gets as usize, "ratio 1:{gets}, N = {n}");
        }
    }
}
