//! Cumulative counters for the `stats` command. Each worker owns one set (relaxed
//! atomics on its own cache line) that only its loop's thread writes; `stats` and the
//! metrics sum them from any thread.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

use crate::metrics::{OpKind, Outcome};

#[derive(Debug, Default)]
pub struct Counters {
    get_requests: AtomicU64,
    multiget_requests: AtomicU64,
    get_keys: AtomicU64,
    get_hits: AtomicU64,
    get_misses: AtomicU64,
    set_requests: AtomicU64,
    other_requests: AtomicU64,
    error_replies: AtomicU64,
    failovers: AtomicU64,
    /// Times the worker went to the servers with requests taken together (one per
    /// request unless `--pipeline` is above 1).
    batches: AtomicU64,
    /// Server connections closed because a reply did not match what was sent on them.
    out_of_step: AtomicU64,
    /// Requests whose keys went out in another request's `get` line (`--merge-gets`).
    merged_gets: AtomicU64,
}

/// The sum of every worker's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub get_requests: u64,
    pub multiget_requests: u64,
    pub get_keys: u64,
    pub get_hits: u64,
    pub get_misses: u64,
    pub set_requests: u64,
    pub other_requests: u64,
    pub error_replies: u64,
    pub failovers: u64,
    pub batches: u64,
    pub out_of_step: u64,
    pub merged_gets: u64,
}

/// Adds `by`. One thread writes a worker's counters (its loop's), so a plain load and
/// store do: no locked read-modify-write on a request's path. Readers see each counter
/// whole, as of some moment.
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(by),
        Ordering::Relaxed,
    );
}

impl Counters {
    pub fn record(&self, op: OpKind, outcome: &Outcome, failovers: u64) {
        match op {
            OpKind::Get | OpKind::MultiGet => {
                let requests = match op {
                    OpKind::Get => &self.get_requests,
                    _ => &self.multiget_requests,
                };
                bump(requests, 1);
                bump(&self.get_keys, u64::from(outcome.keys));
                bump(&self.get_hits, u64::from(outcome.hits));
                bump(
                    &self.get_misses,
                    u64::from(outcome.keys.saturating_sub(outcome.hits)),
                );
            }
            OpKind::Set => bump(&self.set_requests, 1),
            OpKind::Other => bump(&self.other_requests, 1),
        }
        if outcome.error {
            bump(&self.error_replies, 1);
        }
        if failovers > 0 {
            bump(&self.failovers, failovers);
        }
    }

    pub fn record_batch(&self) {
        bump(&self.batches, 1);
    }

    pub fn record_out_of_step(&self) {
        bump(&self.out_of_step, 1);
    }

    pub fn record_merged(&self) {
        bump(&self.merged_gets, 1);
    }

    pub fn sum(all: &[CachePadded<Counters>]) -> Totals {
        let get =
            |f: fn(&Counters) -> &AtomicU64| all.iter().map(|c| f(c).load(Ordering::Relaxed)).sum();
        Totals {
            get_requests: get(|c| &c.get_requests),
            multiget_requests: get(|c| &c.multiget_requests),
            get_keys: get(|c| &c.get_keys),
            get_hits: get(|c| &c.get_hits),
            get_misses: get(|c| &c.get_misses),
            set_requests: get(|c| &c.set_requests),
            other_requests: get(|c| &c.other_requests),
            error_replies: get(|c| &c.error_replies),
            failovers: get(|c| &c.failovers),
            batches: get(|c| &c.batches),
            out_of_step: get(|c| &c.out_of_step),
            merged_gets: get(|c| &c.merged_gets),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_sum_every_worker() {
        let all: Vec<CachePadded<Counters>> = (0..2).map(|_| CachePadded::default()).collect();
        let hit = Outcome {
            keys: 3,
            hits: 2,
            error: false,
        };
        all[0].record(OpKind::MultiGet, &hit, 0);
        all[1].record(
            OpKind::Get,
            &Outcome {
                keys: 1,
                hits: 1,
                error: false,
            },
            1,
        );
        all[1].record(
            OpKind::Set,
            &Outcome {
                keys: 1,
                hits: 0,
                error: true,
            },
            0,
        );
        let t = Counters::sum(&all);
        assert_eq!(
            (
                t.get_requests,
                t.multiget_requests,
                t.get_keys,
                t.get_hits,
                t.get_misses
            ),
            (1, 1, 4, 3, 1)
        );
        assert_eq!((t.set_requests, t.error_replies, t.failovers), (1, 1, 1));
        all[0].record_batch();
        all[1].record_batch();
        assert_eq!(Counters::sum(&all).batches, 2);
        all[1].record_out_of_step();
        assert_eq!(Counters::sum(&all).out_of_step, 1);
    }
}
