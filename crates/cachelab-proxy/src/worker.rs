//! A worker: takes the oldest request, sends its server messages over its own server
//! connections, waits for every involved server, assembles and sends the client reply,
//! records the request's statistics, and takes the next one.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use cachelab_protocol::{parse_reply, parse_request, Expect, Reply, ReplyError, Request};
use tracing::warn;

use crate::backend::Backend;
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
}

/// One message to one server and what came of it.
#[derive(Debug, Clone, Copy)]
struct Exchange {
    server: usize,
    /// The multi-GET part it carries (0 otherwise).
    part: usize,
    sent: Instant,
    result: State,
}

/// Rate limit for warnings about replicated requests, per worker.
const WARN_INTERVAL: Duration = Duration::from_secs(1);

pub struct Worker {
    id: usize,
    shared: Arc<Shared>,
    backends: Vec<Backend>,
    exchanges: Vec<Exchange>,
    blocked: Vec<bool>,
    replicated: Vec<Replicated<Instant>>,
    /// Per part of a sharded multi-GET, the exchange that answered it.
    part_answers: Vec<Option<usize>>,
    first_sent: Option<Instant>,
    last_answer: Option<Instant>,
    failovers: u64,
    last_warning: Option<Instant>,
    suppressed_warnings: u64,
}

impl Worker {
    pub fn new(id: usize, shared: Arc<Shared>) -> Self {
        let config = &shared.config;
        let backends = config
            .servers
            .iter()
            .map(|addr| Backend::new(id, *addr, config.server_timeout, config.backoff_max))
            .collect();
        let servers = config.servers.len();
        Worker {
            id,
            shared,
            backends,
            exchanges: Vec::with_capacity(servers * 2),
            blocked: vec![false; servers],
            replicated: Vec::with_capacity(servers),
            part_answers: Vec::with_capacity(servers),
            first_sent: None,
            last_answer: None,
            failovers: 0,
            last_warning: None,
            suppressed_warnings: 0,
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

    pub async fn run(mut self) {
        self.connect().await;
        while let Some(job) = self.shared.queue.pop(self.id).await {
            let dequeued = Instant::now();
            let queue_len = self.shared.queue.len();
            self.handle(job, dequeued, queue_len).await;
        }
    }

    async fn handle(&mut self, job: Job, dequeued: Instant, queue_len: usize) {
        self.exchanges.clear();
        self.first_sent = None;
        self.last_answer = None;
        self.failovers = 0;
        let outcome = match job.route {
            Route::One(server) => self.serve_read(&job, server).await,
            Route::Sharded { first } => self.serve_sharded(&job, first).await,
            Route::All => self.serve_replicated(&job).await,
        };
        let reply_sent = Instant::now();
        job.conn
            .finished(job.route == Route::All, &self.shared.queue);
        for backend in &mut self.backends {
            backend.finish_request();
        }
        let ts = Timestamps {
            arrival: job.arrival,
            enqueued: job.enqueued,
            dequeued,
            first_sent: self.first_sent,
            last_answer: self.last_answer,
            reply_sent,
        };
        let mut stats = self.shared.lock_worker_stats(self.id);
        stats.queue_len.add(queue_len as f64);
        stats.failovers += self.failovers;
        stats.record(job.op, &ts, outcome);
        for ex in &self.exchanges {
            if let State::Done { at, .. } = ex.result {
                stats.record_server(job.op, ex.server, ex.sent, at);
            }
        }
    }

    /// A read for one server; if that server is down or fails, the next one is tried
    /// (reads are idempotent and every server holds every key).
    async fn serve_read(&mut self, job: &Job, start: usize) -> Outcome {
        let servers = self.backends.len();
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        for attempt in 0..servers {
            let server = (start + attempt) % servers;
            if attempt > 0 {
                self.failovers += 1;
            }
            if !self.backends[server].ensure_connected().await {
                continue;
            }
            let index = self.stage(server, 0, |out| out.extend_from_slice(&job.frame));
            self.send_staged().await;
            self.await_replies(job.expect).await;
            if let State::Done {
                reply, offset, len, ..
            } = self.exchanges[index].result
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
        self.reply_unavailable(job, &outcome, start);
        outcome
    }

    /// A sharded multi-GET: consecutive key ranges to consecutive servers, reassembled
    /// in the client's key order. A part whose server is down or fails moves on to the
    /// next server.
    async fn serve_sharded(&mut self, job: &Job, first: usize) -> Outcome {
        let servers = self.backends.len();
        let frame = job.frame.clone();
        let Ok((Request::Get(get), _)) = parse_request(&frame, &self.shared.config.limits) else {
            unreachable!("sharded jobs are multi-GETs that parsed at decode time");
        };
        let verb: &[u8] = if get.cas { b"gets" } else { b"get" };
        let parts = split_sizes(get.keys.len(), servers);
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        // part_answers[i]: the exchange that answered part i.
        self.part_answers.clear();
        self.part_answers.resize(parts.len(), None);
        for round in 0..servers {
            let mut staged_any = false;
            let mut key_iter = get.keys.iter();
            for (part, size) in parts.clone().enumerate() {
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
                self.stage(server, part, |out| {
                    out.extend_from_slice(verb);
                    for key in keys {
                        out.extend_from_slice(b" ");
                        out.extend_from_slice(key);
                    }
                    out.extend_from_slice(b"\r\n");
                });
                staged_any = true;
            }
            if !staged_any {
                break;
            }
            self.send_staged().await;
            self.await_replies(Expect::Values).await;
            for (index, ex) in self.exchanges.iter().enumerate() {
                if matches!(ex.result, State::Done { .. }) && self.part_answers[ex.part].is_none() {
                    self.part_answers[ex.part] = Some(index);
                }
            }
            if self.part_answers.iter().all(Option::is_some) {
                break;
            }
        }
        if self.part_answers.iter().any(Option::is_none) {
            outcome.error = true;
            self.reply_unavailable(job, &outcome, first);
            return outcome;
        }
        // Every part answered: (server, reply, offset, len) of each, in key order.
        let answers = self.part_answers.iter().map(|index| {
            let ex = &self.exchanges[index.expect("checked above")];
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
    async fn serve_replicated(&mut self, job: &Job) -> Outcome {
        let servers = self.backends.len();
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        for server in 0..servers {
            if self.backends[server].ensure_connected().await {
                self.stage(server, 0, |out| out.extend_from_slice(&job.frame));
            } else {
                let now = Instant::now();
                self.exchanges.push(Exchange {
                    server,
                    part: 0,
                    sent: now,
                    result: State::Failed { at: now },
                });
            }
        }
        self.send_staged().await;
        self.await_replies(job.expect).await;
        self.replicated.clear();
        self.replicated
            .extend(self.exchanges.iter().map(|ex| match ex.result {
                State::Done { reply, at, .. } => Replicated {
                    success: is_success(job.expect, reply),
                    at,
                },
                State::Failed { at } => Replicated { success: false, at },
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
            self.warn_replication(job);
        } else if job.expect == Expect::Arith {
            self.check_replicas_agree(job);
        }
        let ex = self.exchanges[chosen];
        match ex.result {
            State::Done { offset, len, .. } => {
                let bytes = &self.backends[ex.server].rbuf[offset..offset + len];
                self.reply(job, &outcome, |out| out.extend_from_slice(bytes));
            }
            _ => self.reply_unavailable(job, &outcome, ex.server),
        }
        outcome
    }

    /// Composes a message for `server` and records the pending exchange.
    fn stage(&mut self, server: usize, part: usize, compose: impl FnOnce(&mut BytesMut)) -> usize {
        compose(&mut self.backends[server].wbuf);
        self.exchanges.push(Exchange {
            server,
            part,
            sent: Instant::now(),
            result: State::Pending,
        });
        self.exchanges.len() - 1
    }

    /// Sends every backend's composed messages; a backend that fails fails its exchanges.
    async fn send_staged(&mut self) {
        for server in 0..self.backends.len() {
            if self.backends[server].wbuf.is_empty() {
                continue;
            }
            let result = self.backends[server].send().await;
            let now = Instant::now();
            self.first_sent = Some(self.first_sent.map_or(now, |t| t.min(now)));
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
    /// are answered or failed, or the server timeout passes.
    async fn await_replies(&mut self, expect: Expect) {
        let timeout = self.shared.config.server_timeout;
        let backends = &mut self.backends;
        let exchanges = &mut self.exchanges;
        let blocked = &mut self.blocked;
        let all_answered = poll_fn(|cx| {
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
                    match parse_reply(&backend.rbuf[backend.parsed..], expect) {
                        Ok((reply, len)) => {
                            exchanges[index].result = State::Done {
                                reply,
                                offset: backend.parsed,
                                len,
                                at: Instant::now(),
                            };
                            backend.parsed += len;
                            break;
                        }
                        Err(ReplyError::Incomplete) => match backend.poll_fill(cx) {
                            Poll::Ready(Ok(())) => continue,
                            Poll::Ready(Err(reason)) => {
                                backend.fail(reason);
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
                            backend.fail(format!("malformed reply: {why}"));
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
        });
        if tokio::time::timeout(timeout, all_answered).await.is_err() {
            for index in 0..self.exchanges.len() {
                if matches!(self.exchanges[index].result, State::Pending) {
                    let server = self.exchanges[index].server;
                    self.backends[server]
                        .fail(format!("no reply within {} ms", timeout.as_millis()));
                    fail_pending(&mut self.exchanges, server);
                }
            }
        }
        for ex in &self.exchanges {
            let at = match ex.result {
                State::Done { at, .. } | State::Failed { at } => at,
                State::Pending => continue,
            };
            self.last_answer = Some(self.last_answer.map_or(at, |t| t.max(at)));
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

    fn warn_replication(&mut self, job: &Job) {
        let now = Instant::now();
        if self
            .last_warning
            .is_some_and(|last| now.duration_since(last) < WARN_INTERVAL)
        {
            self.suppressed_warnings += 1;
            return;
        }
        let answers: Vec<String> = self
            .exchanges
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

    fn check_replicas_agree(&mut self, job: &Job) {
        let mut numbers = self.exchanges.iter().filter_map(|ex| match ex.result {
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

fn fail_pending(exchanges: &mut [Exchange], server: usize) {
    let now = Instant::now();
    for ex in exchanges.iter_mut().filter(|e| e.server == server) {
        if matches!(ex.result, State::Pending) {
            ex.result = State::Failed { at: now };
        }
    }
}
