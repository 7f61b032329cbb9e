//! Fixtures the routing layer's tests share: a pool of loopback servers and a health
//! view with chosen servers ejected.

use std::collections::HashSet;
use std::net::SocketAddr;

use super::plan::{Alive, PoolServer, ServerId};
use super::ring::Member;

/// Servers ejected by the test; every other server is alive.
pub(crate) struct Ejected(pub(crate) HashSet<ServerId>);

impl Alive for Ejected {
    fn is_ejected(&self, server: ServerId) -> bool {
        self.0.contains(&server)
    }
}

/// No server ejected.
pub(crate) fn none() -> Ejected {
    Ejected(HashSet::new())
}

/// `n` servers on 127.0.0.1 from `first_port` on, with ids from 10 (so a server's id
/// is not its index) and weight 1.
pub(crate) fn servers(n: usize, first_port: usize) -> Vec<PoolServer> {
    servers_with_ids(n, first_port, 10)
}

/// As [`servers`], with ids from `first_id`.
pub(crate) fn servers_with_ids(n: usize, first_port: usize, first_id: usize) -> Vec<PoolServer> {
    (0..n)
        .map(|i| {
            let addr: SocketAddr = format!("127.0.0.1:{}", first_port + i).parse().unwrap();
            PoolServer {
                id: first_id + i,
                addr: addr.into(),
                member: Member {
                    name: addr.to_string(),
                    weight: 1,
                },
            }
        })
        .collect()
}
