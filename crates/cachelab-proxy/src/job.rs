//! A request on its way from the net layer to a worker.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use cachelab_protocol::Expect;

use crate::budget::Charge;
use crate::metrics::OpKind;
use crate::routing::plan::{Access, Pool};
use crate::routing::redis::plan::Route;
use crate::routing::spans::KeySpans;

pub struct Job {
    /// Its client connection's id (in the whole proxy): where the reply goes.
    pub client: u64,
    /// The reply slot reserved on the connection.
    pub seq: u64,
    /// The request's bytes held against the memory budget until the job is dropped.
    pub charge: Charge,
    /// What a worker needs to serve it (the worker's engine sees only this).
    pub request: Request,
}

/// A decoded request as a worker serves it: what the servers get, how it is routed
/// and answered, and when it arrived.
pub struct Request {
    /// The request as the servers get it (noreply already removed).
    pub frame: Bytes,
    /// Where a multi-key request's keys are in `frame` (empty otherwise).
    pub spans: KeySpans,
    /// The pool it was decoded for: a reload after that does not change its servers.
    pub pool: Arc<Pool>,
    pub access: Access,
    /// The round-robin position it took at decode time ([`Pool::assign`]).
    pub rr: u64,
    pub op: OpKind,
    pub expect: Expect,
    pub keys: u32,
    /// The client asked for no reply.
    pub noreply: bool,
    /// A quiet meta command (`q`): replies quiet mode leaves out are not sent.
    pub quiet: Option<cachelab_protocol::MetaCmd>,
    pub arrival: Instant,
    /// When it was decoded and queued; a request held behind its connection's write
    /// barrier counts that wait as queue waiting time.
    pub enqueued: Instant,
    /// A Redis command's route (its table entry and keys); `spans` then holds the spans
    /// of all its arguments. None for a memcached request.
    pub redis: Option<Route>,
}

impl Request {
    /// A write holds its connection's later requests back (the client connection's
    /// write barrier, `client::Ordered`).
    pub fn is_write(&self) -> bool {
        !self.access.is_read()
    }
}

impl std::ops::Deref for Job {
    type Target = Request;

    fn deref(&self) -> &Request {
        &self.request
    }
}
