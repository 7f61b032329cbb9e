//! A worker: takes the oldest request, sends its server messages over its own server
//! connections, waits for every involved server, assembles and sends the client reply,
//! records the request's statistics, and takes the next one.
//!
//! With `--pipeline D` (an extension; the default is 1) a worker takes up to D requests
//! that are already waiting, in queue order, and has them at the servers together: one
//! write and usually one read per server carry the whole batch. Everything below works
//! on a batch; by default it holds one request.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use cachelab_protocol::{parse_reply, parse_request, Expect, Reply, ReplyError, Request};
use tokio::sync::watch;
use tracing::warn;

use crate::backend::{Backend, FillError};
use crate::health::FailureKind;
use crate::job::{Job, Route};
use crate::metrics::{Outcome, Timestamps};
use crate::routing::{is_success, pick_replicated_reply, split_sizes, Outcome as Replicated};
use crate::server::Shared;

#[derive(Debug, Clone, Copy)]
enum State {
    Pending,
    Done {
        reply: Reply,
        offset: usize,
        len: usize,
        at: Instant,
    },
    Failed {
        at: Instant,
    },
    /// The server answered, but the reply could not be held (too large for one request,
    /// or beyond the memory budget): the request is refused, not failed over.
    Refused {
        at: Instant,
        line: &'static [u8],
    },
}

const REPLY_TOO_LARGE: &[u8] = b"SERVER_ERROR reply too large\r\n";
const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";

/// One message to one server and what came of it.
#[derive(Debug, Clone, Copy)]
struct Exchange {
    /// The request of the batch it serves.
    job: usize,
    server: usize,
    /// The multi-GET part it carries (0 otherwise).
    part: usize,
    expect: Expect,
    sent: Instant,
    result: State,
}

/// A request taken from the queue, with what the statistics need of that moment.
struct Taken {
    job: Job,
    dequeued: Instant,
    queue_len: usize,
    /// Failovers already made while staging its first attempt (sharded parts).
    failovers: u64,
}

/// Rate limit for warnings about replicated requests, per worker.
const WARN_INTERVAL: Duration = Duration::from_secs(1);

pub struct Worker {
    id: usize,
    shared: Arc<Shared>,
    backends: Vec<Backend>,
    /// Requests taken together (at most `--pipeline`; one by default).
    batch: Vec<Taken>,
    /// Every message of the batch, in the order it was composed: per server, this is
    /// the order of the replies on that connection.
    exchanges: Vec<Exchange>,
    blocked: Vec<bool>,
    replicated: Vec<Replicated<Instant>>,
    /// Per part of a sharded multi-GET, the exchange that answered it.
    part_answers: Vec<Option<usize>>,
    /// Failovers of the request being finished.
    failovers: u64,
    last_warning: Option<Instant>,
    suppressed_warnings: u64,
    /// Ejections and restores of servers (see `health`): a worker waiting on a server
    /// that gets ejected stops waiting.
    health_changes: watch::Receiver<u64>,
}

impl Worker {
    pub fn new(id: usize, shared: Arc<Shared>) -> Self {
        let config = &shared.config;
        let backends = (0..config.servers.len())
            .map(|index| {
                Backend::new(
                    id,
                    index,
                    Arc::clone(&shared.health),
                    Arc::clone(&shared.budget),
                    config.server_timeout,
                    config.backoff_max,
                    config.max_reply_bytes,
                )
            })
            .collect();
        let servers = config.servers.len();
        let depth = config.pipeline;
        Worker {
            id,
            backends,
            batch: Vec::with_capacity(depth),
            exchanges: Vec::with_capacity(servers * depth * 2),
            blocked: vec![false; servers],
            replicated: Vec::with_capacity(servers),
            part_answers: Vec::with_capacity(servers),
            failovers: 0,
            last_warning: None,
            suppressed_warnings: 0,
            health_changes: shared.health.subscribe(),
            shared,
        }
    }

    /// Opens the connections to every server (a server that is down is retried later).
    pub async fn connect(&mut self) {
        for backend in &mut self.backends {
            if !backend.ensure_connected().await {
                warn!(worker = self.id, server = %backend.addr, reason = backend.reason(),
                      "server unavailable at start");
            }
        }
    }

    /// Takes the oldest request, and with `--pipeline D` up to D-1 more that are already
    /// waiting, serves them together, and goes back to the queue.
    pub async fn run(mut self) {
        self.connect().await;
        let depth = self.shared.config.pipeline;
        loop {
            // While waiting for work, notice a server closing an idle connection (a
            // restart) now, rather than when the next request finds it dead.
            let queue = &self.shared.queue;
            let backends = &mut self.backends;
            let job = tokio::select! {
                biased;
                job = queue.pop(self.id) => job,
                (server, reason) = idle_closed(backends) => {
                    backends[server].drop_connection(reason);
                    continue;
                }
            };
            let Some(job) = job else { break };
            self.take(job);
            while self.batch.len() < depth {
                match self.shared.queue.try_pop() {
                    Some(job) => self.take(job),
                    None => break,
                }
            }
            self.serve_batch().await;
        }
    }

    fn take(&mut self, job: Job) {
        self.batch.push(Taken {
            job,
            dequeued: Instant::now(),
            queue_len: self.shared.queue.len(),
            failovers: 0,
        });
    }

    /// Sends the first attempt of every request of the batch in one write per server,
    /// reads all the replies, then finishes the requests in order (with failover
    /// attempts one request at a time where a server failed).
    async fn serve_batch(&mut self) {
        self.shared.counters[self.id].record_batch();
        self.exchanges.clear();
        for index in 0..self.batch.len() {
            self.stage_first(index).await;
        }
        self.send_staged().await;
        self.await_replies().await;
        let mut batch = std::mem::take(&mut self.batch);
        for (index, taken) in batch.drain(..).enumerate() {
            self.finish(index, taken).await;
        }
        self.batch = batch;
        for backend in &mut self.backends {
            backend.finish_request();
        }
    }

    async fn stage_first(&mut self, index: usize) {
        let job = &self.batch[index].job;
        let (route, expect, frame) = (job.route, job.expect, job.frame.clone());
        match route {
            Route::One(server) => {
                if self.backends[server].ensure_connected().await {
                    self.stage(index, server, 0, expect, |out| {
                        out.extend_from_slice(&frame)
                    });
                }
            }
            Route::Sharded { first } => {
                self.part_answers.clear();
                self.failovers = 0;
                self.stage_sharded_round(index, &frame, first, 0).await;
                self.batch[index].failovers = self.failovers;
            }
            Route::All => {
                for server in 0..self.backends.len() {
                    if self.backends[server].ensure_connected().await {
                        self.stage(index, server, 0, expect, |out| {
                            out.extend_from_slice(&frame)
                        });
                    } else {
                        let now = Instant::now();
                        self.exchanges.push(Exchange {
                            job: index,
                            server,
                            part: 0,
                            expect,
                            sent: now,
                            result: State::Failed { at: now },
                        });
                    }
                }
            }
        }
    }

    /// Replies to one request of the batch and records its statistics.
    async fn finish(&mut self, index: usize, taken: Taken) {
        let Taken {
            job,
            dequeued,
            queue_len,
            failovers,
        } = taken;
        self.failovers = failovers;
        let outcome = match job.route {
            Route::One(server) => self.finish_read(index, &job, server).await,
            Route::Sharded { first } => self.finish_sharded(index, &job, first).await,
            Route::All => self.finish_replicated(index, &job),
        };
        let reply_sent = Instant::now();
        job.conn
            .finished(job.route == Route::All, &self.shared.queue);
        let mut first_sent: Option<Instant> = None;
        let mut last_answer: Option<Instant> = None;
        for ex in self.exchanges.iter().filter(|ex| ex.job == index) {
            // A message that failed the moment it was sent (or staged, for a server
            // that was down) never reached a server.
            if !matches!(ex.result, State::Failed { at } if at == ex.sent) {
                first_sent = Some(first_sent.map_or(ex.sent, |t| t.min(ex.sent)));
            }
            if let State::Done { at, .. } | State::Failed { at } | State::Refused { at, .. } =
                ex.result
            {
                last_answer = Some(last_answer.map_or(at, |t| t.max(at)));
            }
        }
        let ts = Timestamps {
            arrival: job.arrival,
            enqueued: job.enqueued,
            dequeued,
            first_sent,
            last_answer,
            reply_sent,
        };
        let mut stats = self.shared.lock_worker_stats(self.id);
        stats.queue_len.add(queue_len as f64);
        stats.failovers += self.failovers;
        stats.record(job.op, &ts, outcome);
        for ex in self.exchanges.iter().filter(|ex| ex.job == index) {
            if let State::Done { at, .. } = ex.result {
                stats.record_server(job.op, ex.server, ex.sent, at);
            }
        }
    }

    /// The error line of a refused reply to request `index`, if one was refused (a
    /// refusal is about the request, so it is not failed over).
    fn refusal_of(&self, index: usize) -> Option<&'static [u8]> {
        self.exchanges.iter().find_map(|ex| match ex.result {
            State::Refused { line, .. } if ex.job == index => Some(line),
            _ => None,
        })
    }

    /// The latest exchange of request `index` with `server`.
    fn exchange_of(&self, index: usize, server: usize) -> Option<&Exchange> {
        self.exchanges
            .iter()
            .rev()
            .find(|ex| ex.job == index && ex.server == server)
    }

    /// A read for one server; if that server is down or failed, the next one is tried
    /// (reads are idempotent and every server holds every key).
    async fn finish_read(&mut self, index: usize, job: &Job, start: usize) -> Outcome {
        let servers = self.backends.len();
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        for attempt in 0..servers {
            let server = (start + attempt) % servers;
            if let Some(line) = self.refusal_of(index) {
                outcome.error = true;
                self.reply(job, &outcome, |out| out.extend_from_slice(line));
                return outcome;
            }
            if attempt > 0 {
                self.failovers += 1;
                if !self.backends[server].ensure_connected().await {
                    continue;
                }
                self.stage(index, server, 0, job.expect, |out| {
                    out.extend_from_slice(&job.frame)
                });
                self.send_staged().await;
                self.await_replies().await;
            }
            if let Some(Exchange {
                result: State::Done {
                    reply, offset, len, ..
                },
                ..
            }) = self.exchange_of(index, server).copied()
            {
                if let Reply::Values { hits, .. } = reply {
                    outcome.hits = hits;
                }
                outcome.error = reply.is_error();
                let bytes = &self.backends[server].rbuf[offset..offset + len];
                self.reply(job, &outcome, |out| out.extend_from_slice(bytes));
                return outcome;
            }
        }
        outcome.error = true;
        match self.refusal_of(index) {
            Some(line) => self.reply(job, &outcome, |out| out.extend_from_slice(line)),
            None => self.reply_unavailable(job, &outcome, start),
        }
        outcome
    }

    /// Stages the parts of a sharded multi-GET that have no answer yet, each to its
    /// server of this round (the next live one if that is down); false if none could
    /// be staged.
    async fn stage_sharded_round(
        &mut self,
        index: usize,
        frame: &[u8],
        first: usize,
        round: usize,
    ) -> bool {
        let servers = self.backends.len();
        let Ok((Request::Get(get), _)) = parse_request(frame, &self.shared.config.limits) else {
            unreachable!("sharded jobs are multi-GETs that parsed at decode time");
        };
        let verb: &[u8] = if get.cas { b"gets" } else { b"get" };
        let parts = split_sizes(get.keys.len(), servers);
        self.part_answers.resize(parts.len(), None);
        let mut staged_any = false;
        let mut key_iter = get.keys.iter();
        for (part, size) in parts.enumerate() {
            let keys = key_iter.clone().take(size);
            key_iter.nth(size - 1);
            if self.part_answers[part].is_some() {
                continue;
            }
            let preferred = (first + part + round) % servers;
            let mut target = None;
            for k in 0..servers {
                let server = (preferred + k) % servers;
                if self.backends[server].ensure_connected().await {
                    target = Some(server);
                    break;
                }
            }
            let Some(server) = target else { continue };
            if round > 0 || server != (first + part) % servers {
                self.failovers += 1;
            }
            self.stage(index, server, part, Expect::Values, |out| {
                out.extend_from_slice(verb);
                for key in keys {
                    out.extend_from_slice(b" ");
                    out.extend_from_slice(key);
                }
                out.extend_from_slice(b"\r\n");
            });
            staged_any = true;
        }
        staged_any
    }

    /// A sharded multi-GET: consecutive key ranges to consecutive servers, reassembled
    /// in the client's key order. A part whose server is down or failed moves on to the
    /// next server.
    async fn finish_sharded(&mut self, index: usize, job: &Job, first: usize) -> Outcome {
        let servers = self.backends.len();
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        self.part_answers.clear();
        self.part_answers
            .resize(split_sizes(job.keys as usize, servers).len(), None);
        let mut round = 0;
        loop {
            if let Some(line) = self.refusal_of(index) {
                outcome.error = true;
                self.reply(job, &outcome, |out| out.extend_from_slice(line));
                return outcome;
            }
            for (at, ex) in self.exchanges.iter().enumerate() {
                if ex.job == index && matches!(ex.result, State::Done { .. }) {
                    self.part_answers[ex.part].get_or_insert(at);
                }
            }
            round += 1;
            if self.part_answers.iter().all(Option::is_some) || round >= servers {
                break;
            }
            if !self
                .stage_sharded_round(index, &job.frame, first, round)
                .await
            {
                break;
            }
            self.send_staged().await;
            self.await_replies().await;
        }
        if self.part_answers.iter().any(Option::is_none) {
            outcome.error = true;
            self.reply_unavailable(job, &outcome, first);
            return outcome;
        }
        // Every part answered: (server, reply, offset, len) of each, in key order.
        let answers = self.part_answers.iter().map(|at| {
            let ex = &self.exchanges[at.expect("checked above")];
            match ex.result {
                State::Done {
                    reply, offset, len, ..
                } => (ex.server, reply, offset, len),
                _ => unreachable!("part_answers only holds answered exchanges"),
            }
        });
        let backends = &self.backends;
        if let Some((server, _, offset, len)) = answers.clone().find(|a| a.1.is_error()) {
            outcome.error = true;
            let bytes = &backends[server].rbuf[offset..offset + len];
            self.reply(job, &outcome, |out| out.extend_from_slice(bytes));
            return outcome;
        }
        outcome.hits = answers
            .clone()
            .map(|a| match a.1 {
                Reply::Values { hits, .. } => hits,
                _ => 0,
            })
            .sum();
        self.reply(job, &outcome, |out| {
            for (server, reply, offset, _) in answers {
                if let Reply::Values { body_len, .. } = reply {
                    out.extend_from_slice(&backends[server].rbuf[offset..offset + body_len]);
                }
            }
            out.extend_from_slice(b"END\r\n");
        });
        outcome
    }

    /// A write (or delete, incr, decr, touch, flush_all) to every server. The client gets
    /// the success reply only if every server succeeded, otherwise the failure that
    /// arrived last.
    fn finish_replicated(&mut self, index: usize, job: &Job) -> Outcome {
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        // Staged together for this request only, so its exchanges are contiguous.
        let begin = self
            .exchanges
            .iter()
            .position(|ex| ex.job == index)
            .expect("a replicated request has an exchange per server");
        let end = begin + self.backends.len();
        self.replicated.clear();
        self.replicated
            .extend(self.exchanges[begin..end].iter().map(|ex| match ex.result {
                State::Done { reply, at, .. } => Replicated {
                    success: is_success(job.expect, reply),
                    at,
                },
                State::Failed { at } | State::Refused { at, .. } => {
                    Replicated { success: false, at }
                }
                // await_replies settles every exchange; count a straggler as failed now.
                State::Pending => Replicated {
                    success: false,
                    at: Instant::now(),
                },
            }));
        let chosen = pick_replicated_reply(&self.replicated).expect("at least one server");
        let all_succeeded = self.replicated.iter().all(|o| o.success);
        if !all_succeeded {
            outcome.error = true;
            self.warn_replication(job, begin..end);
        } else if job.expect == Expect::Arith {
            self.check_replicas_agree(job, begin..end);
        }
        let ex = self.exchanges[begin + chosen];
        match ex.result {
            State::Done { offset, len, .. } => {
                let bytes = &self.backends[ex.server].rbuf[offset..offset + len];
                self.reply(job, &outcome, |out| out.extend_from_slice(bytes));
            }
            State::Refused { line, .. } => {
                self.reply(job, &outcome, |out| out.extend_from_slice(line))
            }
            _ => self.reply_unavailable(job, &outcome, ex.server),
        }
        outcome
    }

    /// Composes a message for `server` and records the pending exchange.
    fn stage(
        &mut self,
        job: usize,
        server: usize,
        part: usize,
        expect: Expect,
        compose: impl FnOnce(&mut BytesMut),
    ) {
        compose(&mut self.backends[server].wbuf);
        self.exchanges.push(Exchange {
            job,
            server,
            part,
            expect,
            sent: Instant::now(),
            result: State::Pending,
        });
    }

    /// Sends every backend's composed messages; a backend that fails fails its exchanges.
    async fn send_staged(&mut self) {
        for server in 0..self.backends.len() {
            if self.backends[server].wbuf.is_empty() {
                continue;
            }
            let result = self.backends[server].send().await;
            let now = Instant::now();
            for ex in self.exchanges.iter_mut().filter(|e| e.server == server) {
                if matches!(ex.result, State::Pending) {
                    ex.sent = now;
                    if result.is_err() {
                        ex.result = State::Failed { at: now };
                    }
                }
            }
        }
    }

    /// Reads replies from every server with a pending exchange, concurrently, until all
    /// are answered or failed, or the server timeout passes. Each server's replies are
    /// parsed in the order its messages were composed, which is the order it answers in.
    /// A server ejected meanwhile (another worker timed out on it) is given up on at once.
    async fn await_replies(&mut self) {
        let timeout = self.shared.config.server_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        self.health_changes.borrow_and_update();
        loop {
            let backends = &mut self.backends;
            let exchanges = &mut self.exchanges;
            let blocked = &mut self.blocked;
            let changes = &mut self.health_changes;
            let all_answered = poll_fn(|cx| poll_replies(cx, backends, exchanges, blocked));
            let answered = tokio::select! {
                biased;
                done = tokio::time::timeout_at(deadline, all_answered) => Some(done.is_ok()),
                _ = changes.changed() => None,
            };
            match answered {
                Some(true) => return,
                Some(false) => break,
                None => {
                    self.give_up_on_ejected();
                    if !self
                        .exchanges
                        .iter()
                        .any(|e| matches!(e.result, State::Pending))
                    {
                        return;
                    }
                }
            }
        }
        for index in 0..self.exchanges.len() {
            if matches!(self.exchanges[index].result, State::Pending) {
                let server = self.exchanges[index].server;
                self.backends[server].fail(
                    FailureKind::Timeout,
                    format!("no reply within {} ms", timeout.as_millis()),
                );
                fail_pending(&mut self.exchanges, server);
            }
        }
    }

    /// Fails the pending exchanges with servers that are now ejected; their connections
    /// close, since the replies still owed on them would arrive out of step.
    fn give_up_on_ejected(&mut self) {
        for server in 0..self.backends.len() {
            let waiting = self
                .exchanges
                .iter()
                .any(|e| e.server == server && matches!(e.result, State::Pending));
            if waiting && self.shared.health.is_ejected(server) {
                self.backends[server].drop_connection("server ejected while we waited");
                fail_pending(&mut self.exchanges, server);
            }
        }
    }

    /// Counts the request, then sends its reply (or, for noreply, releases its slot).
    /// Counting first means a client that has its reply already sees it in `stats`.
    fn reply(&self, job: &Job, outcome: &Outcome, write: impl FnOnce(&mut BytesMut)) {
        self.shared.counters[self.id].record(job.op, outcome, self.failovers);
        if job.noreply {
            job.conn.complete_silent(job.seq);
        } else {
            job.conn.complete(job.seq, write);
        }
    }

    fn reply_unavailable(&self, job: &Job, outcome: &Outcome, server: usize) {
        let backend = &self.backends[server];
        let line = format!(
            "SERVER_ERROR server {} unavailable: {}\r\n",
            backend.addr,
            backend.reason().replace(['\r', '\n'], " ")
        );
        self.reply(job, outcome, |out| out.extend_from_slice(line.as_bytes()));
    }

    fn warn_replication(&mut self, job: &Job, range: std::ops::Range<usize>) {
        let now = Instant::now();
        if self
            .last_warning
            .is_some_and(|last| now.duration_since(last) < WARN_INTERVAL)
        {
            self.suppressed_warnings += 1;
            return;
        }
        let answers: Vec<String> = self.exchanges[range]
            .iter()
            .map(|ex| {
                let backend = &self.backends[ex.server];
                match ex.result {
                    State::Done { offset, len, .. } => format!(
                        "{}: {}",
                        backend.addr,
                        String::from_utf8_lossy(&backend.rbuf[offset..offset + len]).trim_end()
                    ),
                    _ => format!("{}: {}", backend.addr, backend.reason()),
                }
            })
            .collect();
        warn!(worker = self.id, op = job.op.name(), answers = %answers.join("; "),
              suppressed = self.suppressed_warnings,
              "replicated request did not succeed on every server");
        self.last_warning = Some(now);
        self.suppressed_warnings = 0;
    }

    fn check_replicas_agree(&mut self, job: &Job, range: std::ops::Range<usize>) {
        let mut numbers = self.exchanges[range]
            .iter()
            .filter_map(|ex| match ex.result {
                State::Done {
                    reply: Reply::Number(n),
                    ..
                } => Some(n),
                _ => None,
            });
        let first = numbers.next();
        if numbers.any(|n| Some(n) != first) {
            warn!(
                worker = self.id,
                op = job.op.name(),
                "incr/decr results differ between replicas"
            );
        }
    }
}

/// One pass over the pending exchanges: parses what has arrived, reads more where a reply
/// is incomplete; Ready when none is pending any more.
fn poll_replies(
    cx: &mut std::task::Context<'_>,
    backends: &mut [Backend],
    exchanges: &mut [Exchange],
    blocked: &mut [bool],
) -> Poll<()> {
    blocked.iter_mut().for_each(|b| *b = false);
    let mut pending = false;
    for index in 0..exchanges.len() {
        if !matches!(exchanges[index].result, State::Pending) {
            continue;
        }
        let server = exchanges[index].server;
        if blocked[server] {
            pending = true;
            continue;
        }
        let backend = &mut backends[server];
        loop {
            match parse_reply(&backend.rbuf[backend.parsed..], exchanges[index].expect) {
                Ok((reply, len)) => {
                    exchanges[index].result = State::Done {
                        reply,
                        offset: backend.parsed,
                        len,
                        at: Instant::now(),
                    };
                    backend.parsed += len;
                    backend.answered();
                    break;
                }
                Err(ReplyError::Incomplete) => match backend.poll_fill(cx) {
                    Poll::Ready(Ok(())) => continue,
                    Poll::Ready(Err(FillError::Connection(reason))) => {
                        backend.fail(FailureKind::Connection, reason);
                        fail_pending(exchanges, server);
                        break;
                    }
                    Poll::Ready(Err(refusal)) => {
                        // The rest of this reply is not wanted, and the connection is out
                        // of step; the server itself is fine.
                        let line = match refusal {
                            FillError::TooLarge => REPLY_TOO_LARGE,
                            _ => OUT_OF_MEMORY,
                        };
                        exchanges[index].result = State::Refused {
                            at: Instant::now(),
                            line,
                        };
                        backend.drop_connection("reply refused (too large or out of memory)");
                        fail_pending(exchanges, server);
                        break;
                    }
                    Poll::Pending => {
                        blocked[server] = true;
                        pending = true;
                        break;
                    }
                },
                Err(ReplyError::Malformed(why)) => {
                    backend.fail(FailureKind::Connection, format!("malformed reply: {why}"));
                    fail_pending(exchanges, server);
                    break;
                }
            }
        }
    }
    if pending {
        Poll::Pending
    } else {
        Poll::Ready(())
    }
}

/// Ready with (server, why) when one of the idle connections must be closed.
async fn idle_closed(backends: &mut [Backend]) -> (usize, &'static str) {
    poll_fn(|cx| {
        for (server, backend) in backends.iter_mut().enumerate() {
            if let Poll::Ready(reason) = backend.poll_idle_closed(cx) {
                return Poll::Ready((server, reason));
            }
        }
        Poll::Pending
    })
    .await
}

fn fail_pending(exchanges: &mut [Exchange], server: usize) {
    let now = Instant::now();
    for ex in exchanges.iter_mut().filter(|e| e.server == server) {
        if matches!(ex.result, State::Pending) {
            ex.result = State::Failed { at: now };
        }
    }
}
