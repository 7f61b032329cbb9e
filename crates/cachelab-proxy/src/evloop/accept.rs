//! Accepting clients, and spreading them over the loops. The first loop accepts for all
//! (as memcached's listener thread does for its worker threads) and hands each new
//! connection to the loops in turn: client k goes to loop k mod N, so N loops get
//! equal shares of the connections whatever the kernel's wake-ups. A handed connection
//! crosses threads once, through a channel and the receiving loop's waker; its requests
//! never do.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Instant;

use mio::net::{TcpListener, UnixListener};
use mio::Token;
use tracing::warn;

use super::clients::{self, Client};
use super::{Control, EventLoop, CLIENT_BASE};
use crate::endpoint::{Peer, UnlinkOnDrop};
use crate::mio_socket::MioSocket;

/// A listener handed to the loop (with the pool its clients use, and its TLS if any:
/// [`super::LoopListeners`]).
pub enum LoopListener {
    Tcp(TcpListener),
    /// With the guard that removes the socket file: on one loop's copy only.
    Unix(UnixListener, Option<UnlinkOnDrop>),
}

impl LoopListener {
    /// Takes a listener off the tokio runtime (called on it) for the loop.
    pub fn from_listener(listener: crate::endpoint::Listener) -> io::Result<LoopListener> {
        use crate::endpoint::Listener;
        match listener {
            Listener::Tcp(l) => {
                let std = l.into_std()?;
                std.set_nonblocking(true)?;
                Ok(LoopListener::Tcp(TcpListener::from_std(std)))
            }
            Listener::Unix(l, unlink) => {
                let std = l.into_std()?;
                std.set_nonblocking(true)?;
                Ok(LoopListener::Unix(
                    UnixListener::from_std(std),
                    Some(unlink),
                ))
            }
        }
    }

    /// Another handle on the same listening socket, for another loop: each loop
    /// accepts from it when it is readable, and whichever accepts first owns the client.
    pub fn try_clone(&self) -> io::Result<LoopListener> {
        use std::os::fd::AsFd;
        match self {
            LoopListener::Tcp(l) => {
                let fd = l.as_fd().try_clone_to_owned()?;
                Ok(LoopListener::Tcp(TcpListener::from_std(fd.into())))
            }
            LoopListener::Unix(l, _) => {
                let fd = l.as_fd().try_clone_to_owned()?;
                Ok(LoopListener::Unix(UnixListener::from_std(fd.into()), None))
            }
        }
    }
}

/// A connection the first loop accepted for another: its socket, its peer, and which
/// listener (so which pool and TLS) it came in on.
pub struct Handed {
    socket: MioSocket,
    peer: Peer,
    listener: usize,
}

/// The first loop's way to another loop: its inbox and its waker.
pub struct Handoff {
    pub to: Sender<Handed>,
    pub control: Control,
}

impl EventLoop {
    /// Gives the first loop the other loops to hand clients to, in turn, and the others
    /// their inboxes ([`EventLoop::take_from`]).
    pub fn hand_to(&mut self, others: Vec<Handoff>) {
        self.handoff = others;
    }

    pub fn take_from(&mut self, inbox: std::sync::mpsc::Receiver<Handed>) {
        self.inbox = Some(inbox);
    }

    pub(super) fn accept(&mut self, index: usize, draining: bool) {
        if draining || self.accept_paused_until.is_some() {
            return;
        }
        loop {
            let (listener, _, tls) = &self.listeners[index];
            let accepted = match listener {
                LoopListener::Tcp(l) => l.accept().map(|(s, peer)| {
                    let _ = s.set_nodelay(true);
                    (MioSocket::Tcp(s), Peer::Tcp(peer))
                }),
                LoopListener::Unix(l, _) => {
                    l.accept().map(|(s, _)| (MioSocket::Unix(s), Peer::Unix))
                }
            };
            let (socket, peer) = match accepted {
                Ok(pair) => {
                    self.accept_backoff.succeeded();
                    pair
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Typically out of file descriptors: pause accepting rather than spin.
                    clients::accept_failed(&e);
                    let pause = self.accept_backoff.failed();
                    self.accept_paused_until = Some(Instant::now() + pause);
                    return;
                }
            };
            // The limit is the whole proxy's, over every loop.
            let open = self.net.net.curr_connections.load(Ordering::Relaxed);
            if open >= self.settings.max_connections as u64 {
                let tls = tls.is_some();
                clients::refuse(socket, tls, &self.net, &peer, self.settings.max_connections);
                continue;
            }
            // Counted open now, so that the next accept sees it whichever loop serves it.
            self.net
                .net
                .curr_connections
                .fetch_add(1, Ordering::Relaxed);
            let target = self.next_loop;
            self.next_loop = (target + 1) % (self.handoff.len() + 1);
            let handed = Handed {
                socket,
                peer,
                listener: index,
            };
            match target {
                0 => self.admit(handed),
                k => {
                    let handoff = &self.handoff[k - 1];
                    match handoff.to.send(handed) {
                        Ok(()) => handoff.control.wake(),
                        // That loop has ended (shutting down): the socket closes.
                        Err(_) => self.closed_before_serving(),
                    }
                }
            }
        }
    }

    /// Serves the connections the first loop handed to this one; while draining they
    /// are closed unserved, as a listener closed for shutdown would have refused them.
    pub(super) fn take_handed(&mut self, draining: bool) {
        let Some(inbox) = &self.inbox else {
            return;
        };
        let handed: Vec<Handed> = inbox.try_iter().collect();
        for h in handed {
            if draining {
                drop(h);
                self.closed_before_serving();
            } else {
                self.admit(h);
            }
        }
    }

    fn closed_before_serving(&self) {
        self.net
            .net
            .curr_connections
            .fetch_sub(1, Ordering::Relaxed);
    }

    /// Registers a new client with this loop (counted open by the loop that accepted it).
    fn admit(&mut self, handed: Handed) {
        let Handed {
            socket,
            peer,
            listener,
        } = handed;
        let (_, slot, tls) = &self.listeners[listener];
        let slot = Arc::clone(slot);
        let tls = tls.clone();
        // Numbered in the whole proxy, in order of acceptance.
        let id = self
            .net
            .net
            .total_connections
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        let entry = self.clients.vacant_entry();
        let key = entry.key();
        let token = Token(CLIENT_BASE + key);
        match Client::accept(
            socket,
            tls.as_deref(),
            peer,
            id,
            token,
            self.poll.registry(),
            &self.net,
            slot,
        ) {
            Ok(client) => {
                // A handshake's deadline counts like a linger's.
                let handshaking = client.lingers();
                entry.insert(client);
                self.by_id.insert(id, key);
                if handshaking {
                    self.lingering.push(key);
                }
            }
            Err(e) => {
                warn!(error = %e, "cannot register a client connection");
                self.closed_before_serving();
            }
        }
    }
}
