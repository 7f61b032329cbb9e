//! Trace replay as a source of the engine's requests: which record a connection sends
//! next, when it is due, and what its reply means. Pure: the trace comes in as records.
//!
//! - **Timed** (`--trace-speed S`, S > 0): a record is due at its trace time divided by
//!   S, on the connection its client maps to (client id mod connections), so each
//!   client's requests keep their order and the trace's own timing; latency runs from
//!   the due time, as in the open loop.
//! - **Paced** (`--rate R`): the records in trace order at the open loop's schedule.
//! - **As fast as possible** (`--trace-speed 0`, no rate): the closed loop; each
//!   connection takes the next record when its pipeline has room.
//!
//! A thread's connections share one [`Feed`]: it reads the trace once and hands each
//! connection its records; records waiting for a connection that is behind are the only
//! ones held, so memory is bounded by how far one connection lags the others, never by
//! the trace.

use std::collections::VecDeque;

use super::Engine;
use crate::record::Recorder;
use crate::trace::{Record, TraceError};
use crate::workload::{Op, Sent};

/// Records in, one at a time: a trace reader, or a list in tests.
pub type Records = Box<dyn Iterator<Item = Result<Record, TraceError>>>;

/// One thread's share of a trace, handed out to its connections.
pub struct Feed {
    records: Records,
    /// Which records are this thread's: client id mod the connections of every thread.
    spread: Spread,
    /// Timed replay: each record goes to its client's connection; otherwise any of the
    /// thread's connections takes the next record of the thread's clients.
    by_client: bool,
    /// Per connection of this thread: its records read ahead of it (timed replay).
    waiting: Vec<VecDeque<Record>>,
    ended: bool,
    /// The first refusal of the trace: the run stops and reports it.
    pub error: Option<TraceError>,
}

/// The connections of every thread, and the first of this thread's.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub total: usize,
    pub first: usize,
}

impl Feed {
    /// A feed for `connections` connections of a thread.
    pub fn new(records: Records, connections: usize, spread: Spread, by_client: bool) -> Feed {
        Feed {
            records,
            spread,
            by_client,
            waiting: (0..connections).map(|_| VecDeque::new()).collect(),
            ended: false,
            error: None,
        }
    }

    /// The next record of the thread's connection `conn`, or `None` at the trace's end
    /// (or its first refusal).
    pub fn next_for(&mut self, conn: usize) -> Option<Record> {
        if let Some(record) = self.waiting[conn].pop_front() {
            return Some(record);
        }
        while !self.ended {
            let record = match self.records.next() {
                Some(Ok(record)) => record,
                Some(Err(error)) => {
                    self.error.get_or_insert(error);
                    self.ended = true;
                    break;
                }
                None => {
                    self.ended = true;
                    break;
                }
            };
            let owner = (record.client % self.spread.total as u64) as usize;
            match owner.checked_sub(self.spread.first) {
                Some(mine) if mine < self.waiting.len() && !self.by_client => return Some(record),
                Some(mine) if mine == conn => return Some(record),
                Some(mine) if mine < self.waiting.len() => self.waiting[mine].push_back(record),
                _ => {} // another thread's connection
            }
        }
        None
    }

    /// Records read ahead and held (what replay's memory depends on).
    pub fn held(&self) -> usize {
        self.waiting.iter().map(VecDeque::len).sum()
    }
}

impl Engine {
    /// Composes the next record of the trace into `out` if it may go at `now`: true if
    /// one was composed.
    pub(super) fn issue_replayed(
        &mut self,
        now: u64,
        outs: &mut [Vec<u8>],
        recorder: &mut Recorder,
    ) -> bool {
        let stop = self.rules.stop_issuing_ns;
        let replay = self.replay.as_mut().expect("replaying");
        let Ok(due) = replay.next_due() else {
            return false;
        };
        let start = match (due, &mut self.schedule) {
            (Some(due), _) => {
                if due > now || due >= stop {
                    return false;
                }
                recorder.scheduled(due);
                due
            }
            (None, Some(schedule)) => {
                if schedule.peek() > now || schedule.peek() >= stop {
                    return false;
                }
                let due = schedule.advance(self.gen.rng());
                recorder.scheduled(due);
                due
            }
            (None, None) => {
                if self.outstanding >= self.rules.pipeline || now >= stop {
                    return false;
                }
                0
            }
        };
        let record = replay.next.take().expect("a record was peeked");
        // Sharded, the request is composed aside until its (padded) key says its lane.
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let composing_aside = self.placement.is_some();
        let out = if composing_aside {
            &mut scratch
        } else {
            &mut outs[0]
        };
        let before = out.len();
        replay.composer.compose(&record, out);
        let size = out.len() - before;
        let lane = if composing_aside {
            let lane = super::home(
                self.placement.as_deref(),
                replay.composer.key(),
                self.gen.rng(),
            );
            outs[lane].extend_from_slice(&scratch);
            lane
        } else {
            0
        };
        self.scratch = scratch;
        let value = record
            .op
            .carries_value()
            .then_some(record.value_size as usize);
        let key_len = record.key.len().max(record.key_size as usize);
        recorder
            .sent_counts
            .record(key_hash(&record.key), key_len, value);
        self.lanes[lane].composed += size as u64;
        let sent = Sent {
            op: op_of(&record),
            keys: 1,
            key: 0,
        };
        self.push(lane, sent, start);
        if let Some(p) = self.lanes[lane].pending.back_mut() {
            p.replayed = Some(record.op);
        }
        self.budget = self.budget.map(|n| n - 1);
        true
    }

    /// Timed replay, at the end: records due before the end that could not be sent
    /// count as scheduled, as the open loop's do.
    pub(super) fn account_unsent_records(&mut self, recorder: &mut Recorder) {
        let stop = self.rules.stop_issuing_ns;
        let Some(replay) = &mut self.replay else {
            return;
        };
        while self.budget != Some(0) {
            match replay.next_due() {
                Ok(Some(due)) if due < stop => {
                    recorder.scheduled(due);
                    replay.next = None;
                    self.budget = self.budget.map(|n| n - 1);
                }
                _ => break,
            }
        }
    }
}

/// A trace key's identity for counting (FNV-1a, 64 bits).
fn key_hash(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The statistics type of a replayed request: reads are gets, everything else a write.
pub fn op_of(record: &Record) -> Op {
    if record.op.is_read() {
        Op::Get
    } else {
        Op::Set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{TraceErrorKind, TraceOp};

    fn record(client: u64, time_ns: u64) -> Record {
        Record {
            time_ns,
            key: format!("k{time_ns}").into_bytes(),
            key_size: 4,
            client,
            op: TraceOp::Get,
            ..Record::default()
        }
    }

    fn feed(records: Vec<Record>, connections: usize, spread: Spread, by_client: bool) -> Feed {
        Feed::new(
            Box::new(records.into_iter().map(Ok)),
            connections,
            spread,
            by_client,
        )
    }

    const ALL3: Spread = Spread { total: 3, first: 0 };

    #[test]
    fn timed_replay_gives_each_connection_its_clients_records_in_order() {
        let trace: Vec<Record> = (0..12).map(|i| record(i % 3, i)).collect();
        let mut f = feed(trace, 3, ALL3, true);
        let times = |f: &mut Feed, c| -> Vec<u64> {
            std::iter::from_fn(|| f.next_for(c))
                .map(|r| r.time_ns)
                .collect()
        };
        assert_eq!(times(&mut f, 2), [2, 5, 8, 11]);
        assert_eq!(f.held(), 8, "the others' records wait for them");
        assert_eq!(times(&mut f, 0), [0, 3, 6, 9]);
        assert_eq!(times(&mut f, 1), [1, 4, 7, 10]);
        assert_eq!(f.held(), 0);
    }

    #[test]
    fn a_thread_keeps_only_its_own_connections_records() {
        // Connections 2 and 3 of 4 are this thread's (its 0 and 1).
        let trace: Vec<Record> = (0..8).map(|i| record(i, i)).collect();
        let mut f = feed(trace, 2, Spread { total: 4, first: 2 }, true);
        assert_eq!(f.next_for(1).map(|r| r.client), Some(3));
        assert_eq!(f.held(), 1);
        let rest: Vec<u64> = std::iter::from_fn(|| f.next_for(0))
            .map(|r| r.client)
            .collect();
        assert_eq!(rest, [2, 6]);
        assert_eq!(f.next_for(1).map(|r| r.client), Some(7));
        assert_eq!(f.next_for(1), None);
    }

    #[test]
    fn untimed_any_connection_takes_the_next_of_its_threads_records() {
        // This thread has connections 0 and 1 of 3: client 2's records are not its own.
        let trace: Vec<Record> = (0..6).map(|i| record(i % 3, i)).collect();
        let mut f = feed(trace, 2, ALL3, false);
        assert_eq!(f.next_for(1).map(|r| r.time_ns), Some(0));
        assert_eq!(f.next_for(1).map(|r| r.time_ns), Some(1));
        assert_eq!(f.next_for(0).map(|r| r.time_ns), Some(3));
        assert_eq!(f.next_for(0).map(|r| r.time_ns), Some(4));
        assert_eq!(f.next_for(0), None);
        assert_eq!(f.held(), 0);
    }

    #[test]
    fn a_refusal_ends_the_feed_and_is_kept() {
        let records: Vec<Result<Record, TraceError>> = vec![
            Ok(record(0, 0)),
            Err(TraceError::new(2, TraceErrorKind::TruncatedLine)),
            Ok(record(0, 1)),
        ];
        let one = Spread { total: 1, first: 0 };
        let mut f = Feed::new(Box::new(records.into_iter()), 1, one, false);
        assert!(f.next_for(0).is_some());
        assert_eq!(f.next_for(0), None);
        assert_eq!(f.next_for(0), None);
        assert_eq!(f.error.as_ref().map(|e| e.line), Some(2));
    }
}
