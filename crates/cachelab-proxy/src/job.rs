//! A request on its way from the net layer to a worker.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use cachelab_protocol::Expect;

use crate::budget::Charge;
use crate::client::ClientConn;
use crate::metrics::OpKind;

/// Which servers a request goes to, decided at decode time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A read for one server (GET, or a non-sharded multi-GET).
    One(usize),
    /// A sharded multi-GET: `min(keys, servers)` consecutive key ranges, part i to server
    /// `(first + i) mod n`.
    Sharded { first: usize },
    /// A write or other replicated command, to every server.
    All,
}

pub struct Job {
    pub conn: Arc<ClientConn>,
    /// The reply slot reserved on the connection.
    pub seq: u64,
    /// The request as the servers get it (noreply already removed).
    pub frame: Bytes,
    pub route: Route,
    pub op: OpKind,
    pub expect: Expect,
    pub keys: u32,
    /// The client asked for no reply.
    pub noreply: bool,
    pub arrival: Instant,
    /// When it was decoded and queued; a request held behind its connection's write
    /// barrier counts that wait as queue waiting time.
    pub enqueued: Instant,
    /// The request's bytes held against the memory budget until the job is dropped.
    pub charge: Charge,
}
