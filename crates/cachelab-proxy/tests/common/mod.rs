//! The workspace test harness, with this crate's binary filled in.

#![allow(dead_code)] // each test file uses a different part of the harness

pub use cachelab_testkit::*;

pub struct Proxy;

impl Proxy {
    pub fn start(servers: &[&Memcached], extra: &[&str]) -> cachelab_testkit::Proxy {
        cachelab_testkit::Proxy::start(env!("CARGO_BIN_EXE_cachelab-proxy"), servers, extra)
    }
}
