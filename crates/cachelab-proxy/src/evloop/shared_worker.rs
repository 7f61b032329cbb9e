//! A worker's actions on shared connections: connecting is waiting for the one
//! connection to open, writing is appending to it, and what the connection reports
//! (replies, its end, its opening) reaches the worker as a [`Poke`].

use std::time::Instant;

use mio::Registry;

use super::shared::{Poke, SharedConns};
use crate::down::Down;
use crate::evloop::worker_slot::{Blocked, WorkerSlot};
use crate::health::FailureKind;
use crate::routing::plan::ServerId;
use crate::worker::engine::Event;
use crate::worker::WorkerContext;

impl WorkerSlot {
    /// [`Action::Connect`](crate::worker::engine::Action::Connect) on a shared
    /// connection; false if the worker now waits for it to open.
    pub(in crate::evloop) fn connect_shared(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: &mut SharedConns,
        server: ServerId,
    ) -> bool {
        shared.grow(server + 1);
        let health = &ctx.health;
        let event = if health.is_ejected(server) {
            let down = Down::Ejected(health.reason(server));
            if shared.is_quiet(server) {
                shared.close(ctx, registry, server, None, None, down.clone());
            }
            Event::Unavailable { server, down }
        } else {
            match self.open_shared(ctx, registry, shared, server) {
                Ok(true) => Event::Connected {
                    server,
                    fresh: self.take_fresh(shared, server),
                },
                Ok(false) => {
                    self.blocked = Blocked::Connect(server);
                    return false;
                }
                Err(down) => Event::Unavailable { server, down },
            }
        };
        self.engine.handle(event, self.clock);
        true
    }

    /// [`Action::Write`](crate::worker::engine::Action::Write) on a shared connection:
    /// the bytes join what it sends this turn. A connection with nothing owed that the
    /// server closed is replaced first. False if the worker waits for it to open.
    pub(in crate::evloop) fn write_shared(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: &mut SharedConns,
        server: ServerId,
        idle: bool,
    ) -> bool {
        shared.grow(server + 1);
        if idle && shared.is_quiet(server) {
            if let Some(end) = shared.conns[server].link.idle_end() {
                shared.close(ctx, registry, server, None, None, Down::Idle(end));
            }
        }
        match self.open_shared(ctx, registry, shared, server) {
            Ok(true) => {
                self.send_shared(shared, server);
                true
            }
            Ok(false) => {
                // Only `server` counts here: the offset and retry are the own-connection
                // path's, and whether the connection is fresh is asked when it opens.
                self.blocked = Blocked::Write {
                    server,
                    offset: 0,
                    reconnected: true,
                    retried: true,
                };
                false
            }
            Err(down) => {
                self.engine
                    .handle(Event::WriteFailed { server, down }, self.clock);
                true
            }
        }
    }

    /// Ok(true) when the connection is ready, Ok(false) when the worker waits for it.
    fn open_shared(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: &mut SharedConns,
        server: ServerId,
    ) -> Result<bool, Down> {
        let link = &mut shared.conns[server].link;
        if link.is_ready() {
            return Ok(true);
        }
        if !link.is_opening() {
            link.open(
                &ctx.health,
                registry,
                Instant::now(),
                ctx.settings.connect_timeout,
            )?;
        }
        shared.wait_open(server, self.local);
        Ok(false)
    }

    fn send_shared(&mut self, shared: &mut SharedConns, server: ServerId) {
        let reconnected = self.take_fresh(shared, server);
        shared.send(
            server,
            self.local,
            self.engine.outgoing(server),
            self.engine.outgoing_expects(server),
        );
        // The bytes leave with the turn's other writes ([`SharedConns::flush_all`]).
        self.engine.handle(
            Event::Written {
                server,
                reconnected,
            },
            self.clock,
        );
    }

    /// Whether the connection to `server` is not the one this worker last used (it
    /// uses it from now on).
    fn take_fresh(&mut self, shared: &SharedConns, server: ServerId) -> bool {
        if self.seen.len() <= server {
            self.seen.resize(server + 1, 0);
        }
        let generation = shared.conns[server].generation;
        std::mem::replace(&mut self.seen[server], generation) != generation
    }

    /// The engine closes its connection to `server` (a failure if `kind` is given):
    /// the shared one goes only if it is still the one the worker used.
    pub(in crate::evloop) fn close_shared(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: &mut SharedConns,
        server: ServerId,
        kind: Option<FailureKind>,
        down: Down,
    ) {
        shared.grow(server + 1);
        if self.seen.get(server).copied().unwrap_or(0) != shared.conns[server].generation {
            return; // the connection it used is gone already
        }
        if down == Down::ReplyRefused {
            // Only this worker's reply is too large: the others' replies after it
            // still come. Its own are read past; its next use is a fresh start.
            shared.abandon(server, self.local);
            self.seen[server] = u64::MAX;
            return;
        }
        shared.close(ctx, registry, server, Some(self.local), kind, down);
    }

    /// What a shared connection reports to this worker.
    pub(in crate::evloop) fn poked(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: &mut SharedConns,
        poke: Poke,
        now: Instant,
    ) {
        self.clock = now;
        match poke {
            Poke::Bytes { server, .. } => self.mark(server, None),
            Poke::Down { server, down, .. } => self.mark(server, Some(down)),
            Poke::Opened { server, result, .. } => match (self.blocked, result) {
                (Blocked::Connect(s), Ok(())) if s == server => {
                    let fresh = self.take_fresh(shared, server);
                    let event = Event::Connected { server, fresh };
                    self.handle(ctx, registry, Some(shared), event);
                }
                (Blocked::Connect(s), Err(down)) if s == server => {
                    let event = Event::Unavailable { server, down };
                    self.handle(ctx, registry, Some(shared), event);
                }
                (Blocked::Write { server: s, .. }, Ok(())) if s == server => {
                    self.blocked = Blocked::Nothing;
                    self.send_shared(shared, server);
                    self.step(ctx, registry, Some(shared));
                }
                (Blocked::Write { server: s, .. }, Err(down)) if s == server => {
                    let event = Event::WriteFailed { server, down };
                    self.handle(ctx, registry, Some(shared), event);
                }
                _ => return,
            },
        }
        self.read_inbox(ctx, registry, shared);
    }

    /// Notes what arrived for `server`: replies, or the connection's end.
    fn mark(&mut self, server: ServerId, down: Option<Down>) {
        if self.inbox.len() <= server {
            self.inbox.resize(server + 1, (false, None));
        }
        match down {
            Some(down) => self.inbox[server].1 = Some(down),
            None => self.inbox[server].0 = true,
        }
    }

    /// Tells a waiting engine what arrived for it: a server's replies, then its
    /// connection's end (the replies that came before the end are still its answers).
    pub(in crate::evloop) fn read_inbox(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: &mut SharedConns,
    ) {
        while self.blocked == Blocked::Await {
            let Some(server) = self.inbox.iter().position(|(b, d)| *b || d.is_some()) else {
                return;
            };
            let entry = &mut self.inbox[server];
            let result = if std::mem::take(&mut entry.0) {
                Ok(())
            } else {
                Err(entry.1.take().expect("found"))
            };
            self.handle(ctx, registry, Some(shared), Event::Read { server, result });
        }
    }
}
