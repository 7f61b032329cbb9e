//! What a worker's engine asks for that touches no socket: a client's reply handed to the
//! loop (which owns the client: [`Completion`]), a request's statistics into the worker's
//! units, counters, warnings, carried out by the event loop's worker slots.

use std::ops::Range;
use std::time::Instant;

use tracing::warn;

use super::engine::{Action, Count, Engine, Event, Sample, Warning};
use super::WorkerContext;
use crate::health::Health;
use crate::histograms::Latencies;
use crate::job::Job;
use crate::metrics::{micros, WorkerStats};

/// A reply a worker finished, for the loop to put into its client's reply slot (and to
/// release what the client's write barrier held) before the worker takes more requests.
#[derive(Debug)]
pub struct Completion {
    pub client: u64,
    pub seq: u64,
    /// Where the reply is in the worker's [`Engine::replies`]; None: the client asked
    /// for no reply.
    pub reply: Option<Range<usize>>,
    /// The request changed data (its connection's write barrier lifts).
    pub write: bool,
}

/// What a worker records of its requests, in its loop's thread (no lock): its window's
/// statistics and its cumulative latencies, handed over when asked
/// ([`crate::stats_units`]).
#[derive(Debug)]
pub struct Records {
    pub stats: WorkerStats,
    pub latencies: Latencies,
}

impl Records {
    pub fn new(servers: usize, now: Instant) -> Self {
        Records {
            stats: WorkerStats::new(servers, now),
            latencies: Latencies::default(),
        }
    }
}

/// Carries out `action`, one of those above: a reply, a sample, a count or a warning
/// (the worker slot carries out the others, which need the loop's sockets or time).
/// Replies go to `completed`, samples to `records`.
pub fn apply(
    id: usize,
    ctx: &WorkerContext,
    engine: &mut Engine<Job, Health>,
    action: Action,
    completed: &mut Vec<Completion>,
    records: &mut Records,
) {
    match action {
        Action::Reply {
            index,
            span,
            silent,
            outcome,
            failovers,
        } => {
            // Counting first means a client that has its reply already sees it in
            // `stats`.
            let job = engine.job(index);
            ctx.counters[id].record(job.op, &outcome, failovers);
            completed.push(Completion {
                client: job.client,
                seq: job.seq,
                reply: (!silent).then_some(span),
                write: job.is_write(),
            });
            engine.handle(Event::Replied, Instant::now());
        }
        Action::Sample => {
            let sample = engine.take_sample();
            record(records, engine, sample);
        }
        Action::Count(Count::Batch) => ctx.counters[id].record_batch(),
        Action::Count(Count::OutOfStep) => ctx.counters[id].record_out_of_step(),
        Action::Count(Count::Merged) => ctx.counters[id].record_merged(),
        Action::Warn(Warning::Replication {
            op,
            answers,
            suppressed,
        }) => {
            warn!(worker = id, op, answers = %answers, suppressed,
                  "replicated request did not succeed on every server");
        }
        Action::Warn(Warning::ReplicasDisagree { op }) => {
            warn!(worker = id, op, "incr/decr results differ between replicas");
        }
        Action::Connect(_)
        | Action::Write { .. }
        | Action::Await { .. }
        | Action::Fail { .. }
        | Action::Drop { .. }
        | Action::Idle => unreachable!("carried out by the worker slot"),
    }
}

/// Writes a request's sample into the latency histograms and the statistics unit.
fn record(records: &mut Records, engine: &Engine<Job, Health>, sample: Sample) {
    let Sample {
        index,
        op,
        ts,
        outcome,
        queue_len,
        failovers,
    } = sample;
    let s = ts.sample();
    let Records { stats, latencies } = records;
    latencies.record_response(op, s.response.round() as u64);
    stats.queue_len.add(queue_len as f64);
    stats.failovers += failovers;
    stats.record_sample(op, &s, outcome);
    for (server, sent, at) in engine.server_times(index) {
        let us = micros(at, sent);
        latencies.record_server(server, us as u64);
        stats.record_server_us(op, server, us);
    }
}
