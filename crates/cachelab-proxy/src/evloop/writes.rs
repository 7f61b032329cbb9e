//! A worker's [`Action::Write`](crate::worker::engine::Action::Write) in the event loop: the bytes the engine composed for a
//! server, written as far as the kernel takes them, the rest when the socket is
//! writable; a connection the server closed while idle is replaced first, and a write
//! the kernel refuses is retried once on a fresh connection (the server did not get it).

use std::time::Instant;

use mio::Registry;

use super::worker_slot::{Blocked, WorkerSlot};
use crate::down::Down;
use crate::routing::plan::ServerId;
use crate::worker::engine::Event;
use crate::worker::WorkerContext;

impl WorkerSlot {
    /// `Action::Write`: first checks that a connection idle since its last use was
    /// not closed by the server (it would swallow the bytes) and replaces it if so.
    pub(super) fn write(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        server: ServerId,
        idle: bool,
    ) -> bool {
        self.grow(ctx, server + 1);
        let link = &mut self.links[server];
        let mut reconnected = false;
        if idle {
            if let Some(end) = link.idle_end() {
                link.drop_connection(&ctx.health, registry, Down::Idle(end));
                reconnected = true;
            }
        }
        self.blocked = Blocked::Write {
            server,
            offset: 0,
            reconnected,
            retried: false,
        };
        if reconnected {
            return self.reopen_for_write(ctx, registry, server);
        }
        self.write_some(ctx, registry)
    }

    /// Opens a new connection for the write under way; false if it must be waited for.
    fn reopen_for_write(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        server: ServerId,
    ) -> bool {
        let health = &ctx.health;
        let link = &mut self.links[server];
        let opened = if health.is_ejected(server) {
            let down = Down::Ejected(health.reason(server));
            link.drop_connection(health, registry, down.clone());
            Err(down)
        } else {
            link.open(
                health,
                registry,
                Instant::now(),
                ctx.settings.connect_timeout,
            )
        };
        match opened {
            Ok(_) => false,
            Err(down) => {
                self.blocked = Blocked::Nothing;
                self.engine
                    .handle(Event::WriteFailed { server, down }, Instant::now());
                true
            }
        }
    }

    /// Writes what the kernel takes of the write under way; false if the worker now
    /// waits for the socket.
    pub(super) fn write_some(&mut self, ctx: &WorkerContext, registry: &Registry) -> bool {
        let Blocked::Write {
            server,
            mut offset,
            reconnected,
            retried,
        } = self.blocked
        else {
            return true;
        };
        let link = &mut self.links[server];
        if link.is_opening() {
            return false;
        }
        let Some(socket) = link.socket() else {
            let down = link.retry.down.clone();
            self.blocked = Blocked::Nothing;
            self.engine
                .handle(Event::WriteFailed { server, down }, Instant::now());
            return true;
        };
        let error = match socket.write_from(self.engine.outgoing(server), &mut offset) {
            Ok(true) => {
                self.blocked = Blocked::Nothing;
                self.engine.handle(
                    Event::Written {
                        server,
                        reconnected,
                    },
                    Instant::now(),
                );
                return true;
            }
            Ok(false) => {
                self.blocked = Blocked::Write {
                    server,
                    offset,
                    reconnected,
                    retried,
                };
                return false;
            }
            Err(e) => e,
        };
        let health = &ctx.health;
        if !retried {
            // The kernel refused the bytes: the server did not get the request. Once
            // more, on a fresh connection.
            tracing::info!(worker = self.id, server = %health.addr(server), error = %error,
                           "write failed; retrying once on a fresh connection");
            link.drop_connection(health, registry, Down::WriteRetried);
            self.blocked = Blocked::Write {
                server,
                offset: 0,
                reconnected: true,
                retried: true,
            };
            return self.reopen_for_write(ctx, registry, server);
        }
        let down = Down::WriteFailed(error.to_string());
        link.fail(
            health,
            registry,
            Instant::now(),
            crate::health::FailureKind::Connection,
            down.clone(),
        );
        self.blocked = Blocked::Nothing;
        self.engine
            .handle(Event::WriteFailed { server, down }, Instant::now());
        true
    }

    /// Goes on with the write under way, and with the engine once it is out.
    pub(super) fn resume_write(&mut self, ctx: &WorkerContext, registry: &Registry) {
        if self.write_some(ctx, registry) {
            self.step(ctx, registry, None);
        }
    }
}
