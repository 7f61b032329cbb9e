//! What goes into the engine and what comes out of it: the events the shell tells it,
//! the actions it asks for, and the narrow view of the shared server health it reads.

use std::ops::Range;
use std::time::Instant;

use crate::down::{Down, IdleEnd};
use crate::endpoint::Endpoint;
use crate::health::FailureKind;
use crate::metrics::{OpKind, Outcome, Timestamps};
use crate::routing::plan::{Alive, ServerId};

/// The whole-process view of the servers the engine needs: which are ejected (also
/// what plans read), how many there are, their addresses for error lines, and where to
/// report an answer (a failing server that answers is counted as recovering).
pub trait ServerHealth: Alive {
    fn servers(&self) -> usize;
    fn addr(&self, server: ServerId) -> &Endpoint;
    fn report_success(&self, server: ServerId);
}

impl ServerHealth for crate::health::Health {
    fn servers(&self) -> usize {
        self.len()
    }
    fn addr(&self, server: ServerId) -> &Endpoint {
        crate::health::Health::addr(self, server)
    }
    fn report_success(&self, server: ServerId) {
        crate::health::Health::report_success(self, server)
    }
}

/// What the engine runs with.
#[derive(Debug, Clone, Copy)]
pub struct EngineSettings {
    /// Requests served together (`--pipeline`).
    pub pipeline: usize,
    /// One request's reply may not grow past this (`--max-reply-bytes`).
    pub max_reply_bytes: usize,
    /// Memcached retrievals for one server in a batch go out as one `get` line
    /// (`--merge-gets`).
    pub merge_gets: bool,
}

/// Something that happened, told to [`Engine::handle`] with the time it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The answer to [`Action::Connect`]: the server can be used; `fresh` when a new
    /// connection was opened (bytes left unparsed from the old one are dropped).
    Connected { server: ServerId, fresh: bool },
    /// The answer to [`Action::Connect`]: the server cannot be used now, and why.
    Unavailable { server: ServerId, down: Down },
    /// The answer to [`Action::Write`]: the kernel took the bytes (on a new connection
    /// if `reconnected`).
    Written { server: ServerId, reconnected: bool },
    /// The answer to [`Action::Write`]: the bytes could not be sent; no connection is left.
    WriteFailed { server: ServerId, down: Down },
    /// Bytes were appended to [`Engine::read_buf`] of `server` (Ok), or reading
    /// stopped: the connection closed or failed (Err says how).
    Read {
        server: ServerId,
        result: Result<(), Down>,
    },
    /// The deadline of the last [`Action::Await`] passed.
    TimerDue,
    /// Some server was ejected or restored.
    HealthChanged,
    /// An idle connection must go (between batches).
    IdleClosed { server: ServerId, end: IdleEnd },
    /// The last [`Action::Reply`] was handed to the client's connection (and the
    /// connection told the request is done).
    Replied,
}

/// A statistics counter to add one to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// A batch was served.
    Batch,
    /// A connection was found out of step.
    OutOfStep,
    /// A request's keys went out in another request's `get` line (`--merge-gets`).
    Merged,
}

/// What a request's statistics need, with its stage timestamps (docs/stats-file.md);
/// its servers' answer times are [`Engine::server_times`] of `index`.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub index: usize,
    pub op: OpKind,
    pub ts: Timestamps,
    pub outcome: Outcome,
    pub queue_len: usize,
    pub failovers: u64,
}

/// A warning the engine lets through its rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// A replicated request did not succeed on every server; each server's answer.
    Replication {
        op: &'static str,
        answers: String,
        suppressed: u64,
    },
    /// incr/decr results differ between replicas.
    ReplicasDisagree { op: &'static str },
}

/// What the engine asks the shell to do.
#[derive(Debug, Clone)]
pub enum Action {
    /// Make the server usable (connect if it has no connection and may be retried);
    /// answer with [`Event::Connected`] or [`Event::Unavailable`].
    Connect(ServerId),
    /// Send [`Engine::outgoing`] of the server; answer with [`Event::Written`] or
    /// [`Event::WriteFailed`]. `idle` when no reply is owed on the connection, so a
    /// connection the server closed meanwhile can be noticed and replaced first.
    Write {
        server: ServerId,
        idle: bool,
    },
    /// Wait for replies from the servers [`Engine::wants_read`] until `deadline`; tell
    /// what arrives ([`Event::Read`]), [`Event::TimerDue`] or [`Event::HealthChanged`]
    /// (changes before this action are not news).
    Await {
        deadline: Instant,
    },
    /// Close the connection and count the failure against the server.
    Fail {
        server: ServerId,
        kind: FailureKind,
        down: Down,
    },
    /// Close the connection without counting it against the server.
    Drop {
        server: ServerId,
        down: Down,
    },
    /// Count the request, then complete reply slot of request `index` with the bytes at
    /// `span` (or, when `silent`, without a reply); answer with [`Event::Replied`]. The
    /// bytes stay until [`super::Engine::clear_replies`].
    Reply {
        index: usize,
        /// Where the reply is in [`super::Engine::replies`].
        span: Range<usize>,
        silent: bool,
        outcome: Outcome,
        failovers: u64,
    },
    /// A request's statistics sample is ready: [`super::Engine::take_sample`] (kept
    /// out of the action, which is moved several times, to keep it small).
    Sample,
    Count(Count),
    Warn(Warning),
    /// The batch is done: take the next.
    Idle,
}
