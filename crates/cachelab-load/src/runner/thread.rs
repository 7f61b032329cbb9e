//! One load thread: a current-thread runtime, its connections, and a watchdog that
//! enforces reply timeouts and the run's hard deadline, so a run never hangs.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::{JoinHandle, LocalSet};

use super::clock::{monotonic_ns, Clock};
use super::conn::{opened, Connection, Kill, Shared, Watch};
use super::link::{Link, OpenError};
use super::ticker::Ticker;
use super::{replay, RunError, ThreadPlan, DRAIN_GRACE};
use crate::config::Config;
use crate::engine::replay::Feed;
use crate::engine::{Engine, Replay, Rules};
use crate::record::{CpuUsage, Recorder};
use crate::schedule::Schedule;
use crate::setup::SetupTimes;
use crate::workload::{Generator, Values};

/// How often the watchdog looks at its connections.
const WATCHDOG_TICK: Duration = Duration::from_millis(10);

/// This thread's user and system CPU time so far, in ns.
fn thread_cpu_ns() -> (u64, u64) {
    // SAFETY: rusage is plain data, written whole by getrusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if rc != 0 {
        return (0, 0);
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    (ns(usage.ru_utime), ns(usage.ru_stime))
}

fn fail(plan: &ThreadPlan, error: RunError) {
    plan.failure
        .lock()
        .expect("failure lock")
        .get_or_insert(error);
}

/// Connects, waits for the start, runs, and returns this thread's measurements (`None`
/// if the run did not start).
pub(crate) fn run(plan: ThreadPlan) -> Option<Recorder> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let feed = match replay::feed(&plan.config, plan.index) {
        Ok(feed) => feed,
        Err(error) => {
            fail(&plan, error);
            None
        }
    };
    let prepared = match runtime {
        Ok(runtime) => match runtime.block_on(prepare(&plan, feed.as_ref())) {
            Ok(connections) => Some((runtime, connections)),
            Err(error) => {
                fail(&plan, error);
                None
            }
        },
        Err(error) => {
            fail(&plan, RunError::Thread(error));
            None
        }
    };
    plan.barrier.wait();
    plan.barrier.wait();
    let (runtime, connections) = prepared?;
    if plan.failure.lock().expect("failure lock").is_some() {
        return None;
    }
    let config = &plan.config;
    if timed(config) {
        // Let the kernel wake us as close to each scheduled time as it can.
        // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
        }
    }
    let cpu_before = thread_cpu_ns();
    let wall_before = monotonic_ns();
    let test_ns = config.test_time.map(|t| t.as_nanos() as u64);
    let clock = Clock::starting_at(plan.origin_ns.load(Ordering::SeqCst));
    let busy_poll_ns = config.busy_poll.as_nanos() as u64;
    // The timer's descriptor belongs to this thread's runtime. A closed loop needs the
    // ticker only to spin for replies.
    let ticker = {
        let _entered = runtime.enter();
        (timed(config) || busy_poll_ns > 0)
            .then(|| Ticker::new(clock, busy_poll_ns, connections.len()))
            .transpose()
    };
    let ticker = match ticker {
        Ok(ticker) => ticker,
        Err(error) => {
            fail(&plan, RunError::Thread(error));
            return None;
        }
    };
    let shared = Rc::new(Shared {
        clock,
        recorder: std::cell::RefCell::new(Recorder::new(plan.window)),
        rules: rules(config),
        targets: plan.targets.clone(),
        connect_timeout: config.connect_timeout,
        reply_timeout: config.reply_timeout,
        ticker,
    });
    // The connections opened before the clock started: their set-up is reported, never
    // in request latency.
    for (_, links) in &connections {
        for (link, times) in links {
            opened(&mut shared.recorder.borrow_mut(), link, *times);
        }
    }
    let hard_deadline =
        test_ns.map(|t| t + DRAIN_GRACE.min(config.reply_timeout).as_nanos() as u64);
    let reply_timeout_ns = config.reply_timeout.as_nanos() as u64;
    LocalSet::new().block_on(&runtime, async {
        let mut watched = Vec::with_capacity(connections.len());
        for (connection, links) in connections {
            let watch = connection.watch.clone();
            let links = links.into_iter().map(|(link, _)| link).collect();
            watched.push((
                watch,
                tokio::task::spawn_local(connection.run(shared.clone(), links)),
            ));
        }
        if shared.ticker.is_some() {
            let shared = shared.clone();
            let watches: Vec<_> = watched.iter().map(|(w, _)| w.clone()).collect();
            tokio::task::spawn_local(async move {
                let ticker = shared.ticker.as_ref().expect("checked");
                if ticker.run().await.is_err() {
                    // Without its timer no connection would send again: end the run.
                    for watch in &watches {
                        watch.interrupt(Kill::Deadline);
                    }
                }
            });
        }
        watchdog(&shared, &watched, hard_deadline, reply_timeout_ns).await;
    });
    let mut recorder = shared.recorder.replace(Recorder::new(plan.window));
    let cpu_after = thread_cpu_ns();
    recorder.cpu = CpuUsage::thread(
        cpu_after.0.saturating_sub(cpu_before.0),
        cpu_after.1.saturating_sub(cpu_before.1),
        monotonic_ns() - wall_before,
    );
    // A trace refused part-way stopped its connections: the run fails with its line.
    if let (Some(feed), Some(trace)) = (&feed, &plan.config.trace) {
        if let Some(error) = feed.borrow_mut().error.take() {
            fail(&plan, replay::refused(trace, error));
        }
    }
    Some(recorder)
}

/// Requests go at due times: the open loop, or a trace replayed with its own timing.
fn timed(config: &Config) -> bool {
    config.open_loop.is_some() || config.trace.as_ref().is_some_and(|t| t.speed > 0.0)
}

/// The engine's rules for this run's connections.
fn rules(config: &Config) -> Rules {
    Rules {
        protocol: config.workload.protocol,
        pipeline: config.pipeline,
        stop_issuing_ns: config.test_time.map_or(u64::MAX, |t| t.as_nanos() as u64),
        reconnect_interval: config.reconnect_interval,
        lookaside: config.workload.lookaside,
        timestamps: config.timestamps,
    }
}

/// A connection ready to run, its links (one per server), and what opening each took.
type Prepared = (Connection, Vec<(Link, SetupTimes)>);

async fn prepare(
    plan: &ThreadPlan,
    feed: Option<&Rc<RefCell<Feed>>>,
) -> Result<Vec<Prepared>, RunError> {
    let config = &plan.config;
    let total = config.connections();
    let placement = config.shard.as_ref().map(|s| Rc::new(s.placement()));
    let workload = &config.workload;
    let values = Rc::new(Values::new(
        workload.data_size.max(),
        workload.random_data,
        config.seed ^ plan.index as u64,
    ));
    let mut connections = Vec::with_capacity(config.clients);
    for c in 0..config.clients {
        let client = plan.index * config.clients + c;
        let mut gen = Generator::new(workload, config.seed, client, total, values.clone());
        let budget = gen.budget(config.requests);
        let schedule = config
            .open_loop
            .as_ref()
            .map(|o| Schedule::new(o.arrival.clone(), o.rate, client, total, gen.rng()));
        let mut engine = Engine::new(rules(config), gen, budget, schedule);
        if let (Some(feed), Some(trace)) = (feed, &config.trace) {
            let protocol = config.workload.protocol;
            engine = engine.replaying(Replay::new(feed.clone(), c, trace.speed, protocol));
        }
        if let Some(placement) = &placement {
            engine = engine.sharded(placement.clone());
        }
        let connection = Connection::new(engine, c);
        let mut links = Vec::with_capacity(plan.targets.len());
        for target in &plan.targets {
            let server = target.name.clone();
            let opened = Link::open(target, config.connect_timeout)
                .await
                .map_err(|error| match error {
                    OpenError::Connect(cause) => RunError::Connect { server, cause },
                    OpenError::Handshake(reason) => RunError::Handshake { server, reason },
                })?;
            links.push(opened);
        }
        connections.push((connection, links));
    }
    Ok(connections)
}

/// Interrupts connections whose oldest request waited past the reply timeout, and all of
/// them at the hard deadline; returns when every connection's task has ended (normally or
/// not: a task that panicked cannot keep the run from ending).
async fn watchdog(
    shared: &Shared,
    watched: &[(Rc<Watch>, JoinHandle<()>)],
    hard_deadline: Option<u64>,
    reply_timeout_ns: u64,
) {
    let mut tick = tokio::time::interval(WATCHDOG_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        if watched.iter().all(|(_, task)| task.is_finished()) {
            return;
        }
        let now = shared.clock.now();
        for (watch, _) in watched.iter().filter(|(_, task)| !task.is_finished()) {
            if hard_deadline.is_some_and(|d| now >= d) {
                watch.interrupt(Kill::Deadline);
            } else if watch
                .waiting_since
                .get()
                .is_some_and(|since| now.saturating_sub(since) > reply_timeout_ns)
            {
                watch.interrupt(Kill::ReplyTimeout);
            }
        }
    }
}
