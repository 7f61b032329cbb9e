//! What a test of the engine starts from: a pool over numbered servers, requests as the
//! net layer decodes them, the shared health as a set of ejections the test sets, and
//! the job type the engine is generic over.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cachelab_protocol::Limits;

use crate::decode::{Class, Decoder, Step};
use crate::endpoint::Endpoint;
use crate::job::Request;
use crate::resp_decode::{RespDecoder, RespStep};
use crate::routing::hash::Hash;
use crate::routing::plan::{Alive, Mode, Pool, PoolServer, ReadPolicy, ServerId};
use crate::routing::ring::{Distribution, Member};
use crate::routing::Protocol;
use crate::worker::engine::ServerHealth;

/// The ejections a test sets.
pub(crate) struct FakeHealth {
    addrs: Vec<Endpoint>,
    pub(crate) ejected: Mutex<HashSet<ServerId>>,
}

impl FakeHealth {
    pub(crate) fn new(servers: usize) -> FakeHealth {
        FakeHealth {
            addrs: (0..servers).map(addr).collect(),
            ejected: Mutex::new(HashSet::new()),
        }
    }
}

fn addr(server: ServerId) -> Endpoint {
    let a: std::net::SocketAddr = format!("127.0.0.1:{}", 21000 + server).parse().unwrap();
    a.into()
}

impl Alive for FakeHealth {
    fn is_ejected(&self, server: ServerId) -> bool {
        self.ejected.lock().unwrap().contains(&server)
    }
}

impl ServerHealth for FakeHealth {
    fn servers(&self) -> usize {
        self.addrs.len()
    }
    fn addr(&self, server: ServerId) -> &Endpoint {
        &self.addrs[server]
    }
    fn report_success(&self, _: ServerId) {}
}

/// A request of a test, numbered in the order it was taken.
pub(crate) struct TestJob {
    pub(crate) n: usize,
    pub(crate) request: Request,
}

impl std::ops::Deref for TestJob {
    type Target = Request;
    fn deref(&self) -> &Request {
        &self.request
    }
}

/// A pool over servers 0..n: `replicas` None for replicate (every server), else shard.
pub(crate) fn pool(n: usize, replicas: Option<usize>, protocol: Protocol) -> Arc<Pool> {
    let servers = (0..n)
        .map(|i| PoolServer {
            id: i,
            addr: addr(i),
            member: Member {
                name: addr(i).to_string(),
                weight: 1,
            },
        })
        .collect();
    let mode = match replicas {
        None => Mode::Replicate {
            split_multiget: false,
        },
        Some(replicas) => Mode::Shard { replicas },
    };
    let mut pool = Pool::new(
        "sim".into(),
        servers,
        mode,
        Hash::Fnv1a64,
        None,
        Distribution::Ketama,
        false,
        ReadPolicy::RoundRobin,
        Duration::from_millis(100),
    );
    pool.protocol = protocol;
    Arc::new(pool)
}

/// A request as the net layer decodes `bytes` for `pool` (one whole request).
pub(crate) fn request(pool: &Arc<Pool>, bytes: &[u8], arrival: Instant) -> Request {
    let frame = Bytes::copy_from_slice(bytes);
    if pool.protocol == Protocol::Redis {
        let step = RespDecoder::default().step(bytes, &Limits::default(), pool);
        let RespStep::Forward { len, forward } = step else {
            panic!("not a forwarded command: {step:?}");
        };
        assert_eq!(len, bytes.len());
        let access = forward.route.access();
        return Request {
            frame,
            spans: forward.args,
            rr: pool.assign(access, forward.route.assigned_keys()),
            pool: Arc::clone(pool),
            access,
            op: forward.op,
            expect: cachelab_protocol::Expect::Resp,
            keys: forward.keys,
            noreply: false,
            quiet: None,
            arrival,
            enqueued: arrival + Duration::from_micros(1),
            redis: Some(forward.route),
        };
    }
    let Step::Request {
        len,
        class: Class::Forward(f),
        spans,
    } = Decoder::default().step(bytes, &Limits::default())
    else {
        panic!("not a forwarded request");
    };
    assert_eq!(len, bytes.len());
    assert!(
        !f.noreply && f.quiet.is_none(),
        "the net layer strips these"
    );
    Request {
        frame,
        spans,
        rr: pool.assign(f.access, f.keys as usize),
        pool: Arc::clone(pool),
        access: f.access,
        op: f.op,
        expect: f.expect,
        keys: f.keys,
        noreply: false,
        quiet: None,
        arrival,
        enqueued: arrival + Duration::from_micros(1),
        redis: None,
    }
}
