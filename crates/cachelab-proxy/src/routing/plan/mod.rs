//! Routing plans: a request and its pool's state in, the messages to send out (which
//! server gets which part, which servers may stand in for it) and how the replies merge.
//! Pure: the worker carries plans out; tests check them without sockets.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::hash::Hash;
use super::ring::{Distribution, Member, Ring};
use super::Protocol;

/// A server's index in the proxy's server table (see `health::Health`): the same
/// server in two pools, or before and after a reload, has the same id.
pub type ServerId = usize;

/// How a pool spreads keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every server holds every key: writes go to all, reads to one, round-robin
    /// (section 1 of the spec). `split_multiget`: `-s`, multi-GETs split evenly.
    Replicate { split_multiget: bool },
    /// Each key on `replicas` consecutive servers of the ring (1: plain sharding,
    /// twemproxy's model).
    Shard { replicas: usize },
}

/// Which replica serves a read in a `shard` pool with replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadPolicy {
    /// Rotate over the key's replicas, assigned at decode time.
    RoundRobin,
    /// The key's first replica, the others only when it fails.
    Primary,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolServer {
    pub id: ServerId,
    pub addr: crate::endpoint::Endpoint,
    pub member: Member,
}

/// A pool as requests see it: immutable once built (a reload builds a new one).
#[derive(Debug)]
pub struct Pool {
    pub name: String,
    pub servers: Vec<PoolServer>,
    pub mode: Mode,
    pub hash: Hash,
    pub hash_tag: Option<[u8; 2]>,
    pub ring: Ring,
    /// Shard pools: a key whose server is ejected goes to the next live one on the ring
    /// (twemproxy's `auto_eject_hosts`); otherwise it fails with its server.
    pub auto_eject: bool,
    pub read_policy: ReadPolicy,
    /// How long a server of this pool may take to answer.
    pub timeout: Duration,
    /// What its clients and servers speak (memcached unless set after [`Pool::new`]).
    pub protocol: Protocol,
    /// A Redis pool's password: its clients must `AUTH` with it (and its servers get it).
    pub redis_auth: Option<String>,
    /// A Redis pool's database: the one its servers are on, and the only one its
    /// clients may `SELECT`.
    pub redis_db: u32,
    rr: AtomicU64,
}

/// What a request does, for routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// get (one key or several), mg, me.
    Read,
    /// gets, mg with `c`: the CAS token a client gets must be its key's primary's, so
    /// that its `cas` (which goes there) can match.
    ReadCas,
    /// Storage, delete, incr/decr, touch, ms, md, ma: one key.
    Write,
    /// cas, and ms/md/ma with `C` (compare) or `c` (return the CAS): applied at the
    /// key's primary; when it succeeds there, written to the key's other replicas.
    WriteCas,
    /// flush_all: every server of the pool, whatever the mode.
    Broadcast,
}

impl Access {
    pub fn is_read(self) -> bool {
        matches!(self, Access::Read | Access::ReadCas)
    }
}

/// Which servers are ejected right now (the health registry; a set in tests).
pub trait Alive {
    fn is_ejected(&self, server: ServerId) -> bool;
}

/// How the parts' replies become the client's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// One part; its reply is relayed as it is.
    Relay,
    /// Every part must succeed: the success reply, else the failure that came last.
    AllMustSucceed,
    /// Multi-GET parts of consecutive keys: their values in part order, one END.
    Concat,
    /// Multi-GET parts grouped by server: values put back in the client's key order.
    ByKey,
    /// One part, at the key's primary; its reply is the client's. When it succeeds,
    /// [`Plan::follow_ups`] get the same write without its compare (so they converge).
    Primary,
    /// A Redis command cut into parts of its keys ([`Plan::key_parts`] gives each key's
    /// part): the parts' replies merged by the command's rule.
    Resp(RespMerge),
}

/// How the parts of a split Redis command merge (see `routing::redis::split`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespMerge {
    /// `MGET`: the values in the client's key order.
    Values,
    /// `DEL`, `UNLINK`, `EXISTS`, `TOUCH`: the counts summed.
    Sum,
    /// `MSET`: `+OK` when every part is.
    AllOk,
}

/// Which keys a part's message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKeys {
    /// The request's own frame, as received.
    Whole,
    /// Keys `start..start + len` of the request, as a `get`/`gets`.
    Consecutive { start: usize, len: usize },
    /// The keys whose entry in [`Plan::key_parts`] is this part, as a `get`/`gets`.
    Listed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub keys: PartKeys,
    /// Indices into [`Plan::candidates`]: the server to use first, then the ones that
    /// may stand in for it when it fails.
    pub candidates: Range<usize>,
}

/// A plan; reused by its worker (cleared, not reallocated, for each request).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    pub merge: Option<Merge>,
    pub parts: Vec<Part>,
    pub candidates: Vec<ServerId>,
    /// `Merge::ByKey` and `Merge::Resp`: the part serving each of the client's keys, in
    /// the client's order.
    pub key_parts: Vec<u32>,
    /// `Merge::Primary`: the key's other replicas.
    pub follow_ups: Vec<ServerId>,
}

impl Plan {
    pub fn clear(&mut self) {
        self.merge = None;
        self.parts.clear();
        self.candidates.clear();
        self.key_parts.clear();
        self.follow_ups.clear();
    }

    pub fn merge(&self) -> Merge {
        self.merge.expect("a built plan has a merge rule")
    }

    /// The servers that may serve part `part`, in order of preference.
    pub fn candidates_of(&self, part: usize) -> &[ServerId] {
        &self.candidates[self.parts[part].candidates.clone()]
    }

    pub(crate) fn push_part(
        &mut self,
        keys: PartKeys,
        candidates: impl IntoIterator<Item = ServerId>,
    ) {
        let start = self.candidates.len();
        self.candidates.extend(candidates);
        self.parts.push(Part {
            keys,
            candidates: start..self.candidates.len(),
        });
    }
}

pub use cachelab_placement::tagged;

impl Pool {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        servers: Vec<PoolServer>,
        mode: Mode,
        hash: Hash,
        hash_tag: Option<[u8; 2]>,
        distribution: Distribution,
        auto_eject: bool,
        read_policy: ReadPolicy,
        timeout: Duration,
    ) -> Pool {
        let members: Vec<Member> = servers.iter().map(|s| s.member.clone()).collect();
        Pool {
            name,
            ring: Ring::new(distribution, &members),
            servers,
            mode,
            hash,
            hash_tag,
            auto_eject,
            read_policy,
            timeout,
            protocol: Protocol::Memcached,
            redis_auth: None,
            redis_db: 0,
            rr: AtomicU64::new(0),
        }
    }

    /// A replicate pool over `servers` (the command line's `-m`).
    pub fn replicate(servers: Vec<PoolServer>, split_multiget: bool, timeout: Duration) -> Pool {
        Pool::new(
            "default".into(),
            servers,
            Mode::Replicate { split_multiget },
            Hash::Fnv1a64,
            None,
            Distribution::Ketama,
            true,
            ReadPolicy::RoundRobin,
            timeout,
        )
    }

    pub(crate) fn n(&self) -> usize {
        self.servers.len()
    }

    pub(crate) fn replicas(&self) -> usize {
        match self.mode {
            Mode::Shard { replicas } => replicas.clamp(1, self.n()),
            Mode::Replicate { .. } => self.n(),
        }
    }

    /// The round-robin position a request takes at decode time, so that assignment
    /// order is arrival order: a replicate read takes one (or, split, one per part);
    /// a read from rotating replicas takes one; everything else takes none.
    pub fn assign(&self, access: Access, keys: usize) -> u64 {
        let take = match (self.mode, access) {
            (Mode::Replicate { split_multiget }, Access::Read) => {
                if split_multiget && keys > 1 && self.n() > 1 {
                    keys.min(self.n())
                } else {
                    1
                }
            }
            (Mode::Shard { .. }, Access::Read)
                if self.replicas() > 1 && self.read_policy == ReadPolicy::RoundRobin =>
            {
                1
            }
            _ => 0,
        };
        if take == 0 {
            0
        } else {
            self.rr.fetch_add(take as u64, Ordering::Relaxed)
        }
    }

    /// The ring position of a key.
    pub fn key_hash(&self, key: &[u8]) -> u32 {
        if self.n() == 1 || key.is_empty() {
            return 0;
        }
        match self.ring.kind() {
            Distribution::Random => rand::random(),
            _ => self.hash.hash(tagged(key, self.hash_tag)),
        }
    }

    /// The pool-local servers holding `key`, in ring order (its replicas first).
    pub fn key_servers(&self, key: &[u8]) -> impl Iterator<Item = usize> + '_ {
        self.ring.walk(self.key_hash(key))
    }

    /// Where a read of `key` may go, in order, given the decode-time position `rr`.
    fn read_candidates(&self, key: &[u8], rr: u64, out: &mut Vec<ServerId>) {
        self.candidates_by(key, rr, self.read_policy, out);
    }

    /// The servers holding `key` that are in service, in ring order: the first is the
    /// key's primary (its `gets` and `cas` go there).
    fn key_replicas(&self, key: &[u8]) -> impl Iterator<Item = ServerId> + '_ {
        self.key_servers(key)
            .take(self.replicas())
            .map(|m| self.servers[m].id)
    }

    pub(crate) fn candidates_by(
        &self,
        key: &[u8],
        rr: u64,
        policy: ReadPolicy,
        out: &mut Vec<ServerId>,
    ) {
        let replicas = self.replicas();
        let walk = self.key_servers(key);
        if replicas > 1 {
            let mut holders = [0usize; 16];
            let held = replicas.min(holders.len());
            for (slot, m) in holders.iter_mut().zip(walk.take(held)) {
                *slot = m;
            }
            let offset = match policy {
                ReadPolicy::RoundRobin => (rr % held as u64) as usize,
                ReadPolicy::Primary => 0,
            };
            out.extend((0..held).map(|i| self.servers[holders[(offset + i) % held]].id));
        } else if self.auto_eject {
            out.extend(walk.map(|m| self.servers[m].id));
        } else {
            out.extend(walk.take(1).map(|m| self.servers[m].id));
        }
    }
}

mod build;
