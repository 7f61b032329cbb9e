//! Redis pools in tests: a proxy in front of redis-servers, and a RESP client that
//! sends one command and reads its one reply as text (exact bytes, for comparisons).

use std::net::SocketAddr;

use cachelab_protocol::resp::compose_command;
use cachelab_protocol::Expect;
use cachelab_testkit::{Client, Redis};

use super::inproc::Proxy;

/// `n` redis-servers.
pub fn start_redis(n: usize) -> Vec<Redis> {
    (0..n).map(|_| Redis::start()).collect()
}

/// A proxy with the command line's pool over `servers`, speaking Redis, with `extra`.
pub fn redis_proxy(servers: &[Redis], extra: &[&str]) -> Proxy {
    let mut args: Vec<String> = ["-l", "127.0.0.1", "-p", "0", "--protocol", "redis", "-m"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(servers.iter().map(|s| s.addr.to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    Proxy::start_args(&args)
}

/// A proxy with one sharded Redis pool over `servers` (murmur, ketama, hash tag `{}`),
/// written as a TOML config into the returned directory, with `extra` options.
pub fn redis_shard_pool(servers: &[Redis], extra: &[&str]) -> (tempfile::TempDir, Proxy) {
    let dir = cachelab_testkit::temp_dir();
    let path = dir.path().join("cachelab-shards.toml");
    let list: Vec<String> = servers.iter().map(|s| format!("\"{}\"", s.addr)).collect();
    std::fs::write(
        &path,
        format!(
            "[pools.r]\nlisten = \"127.0.0.1:0\"\nprotocol = \"redis\"\nmode = \"shard\"\n\
             hash = \"murmur\"\nhash_tag = \"{{}}\"\nservers = [{}]\n",
            list.join(", ")
        ),
    )
    .unwrap();
    let mut args = vec!["--config".to_string(), path.display().to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    (dir, Proxy::start_args(&args))
}

/// A blocking RESP client: one command, one reply.
pub struct RespClient {
    pub client: Client,
}

impl RespClient {
    pub fn connect(addr: SocketAddr) -> RespClient {
        RespClient {
            client: Client::connect(addr),
        }
    }

    /// Sends `args` as an array of bulk strings and returns the reply's bytes as text.
    pub fn cmd(&mut self, args: &[&str]) -> String {
        self.pipelined(&[args]).remove(0)
    }

    /// Sends every command in one write, then reads their replies in order: the
    /// proxy's idle workers all get one (the lowest-numbered idle worker serves).
    pub fn pipelined(&mut self, commands: &[&[&str]]) -> Vec<String> {
        let mut out = Vec::new();
        for args in commands {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            compose_command(&mut out, &args);
        }
        self.client.send(&out);
        commands.iter().map(|_| self.reply()).collect()
    }

    /// Reads one reply.
    pub fn reply(&mut self) -> String {
        String::from_utf8_lossy(&self.client.read_reply(Expect::Resp)).into_owned()
    }
}

/// The RESP text of a bulk string.
pub fn bulk(value: &str) -> String {
    format!("${}\r\n{value}\r\n", value.len())
}
