//! A simulated server: a small in-memory memcached or Redis that answers the bytes the
//! engine composes, and can refuse connections, die after some requests, stay silent,
//! answer garbage or answer twice.

use std::collections::HashMap;
use std::time::Duration;

use cachelab_protocol::resp::{parse_command, RespLimits};
use cachelab_protocol::{parse_request, Limits, Request as Parsed, StoreOp};

/// How a simulated server misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behaviour {
    Normal,
    /// Refuses connections.
    Refuses,
    /// Answers this many requests, then closes its connection (and refuses new ones).
    DiesAfter(usize),
    /// Never answers.
    Silent,
    /// Answers `ERROR` to everything (a server that reads the requests differently).
    Garbage,
    /// Answers every request twice.
    Twice,
    /// Answers stores with NOT_STORED (and Redis SET with an error).
    RefusesWrites,
}

/// One simulated server: its data, its delay and its behaviour.
pub(crate) struct SimServer {
    pub(crate) data: HashMap<Vec<u8>, Vec<u8>>,
    pub(crate) delay: Duration,
    pub(crate) behaviour: Behaviour,
    pub(crate) answered: usize,
    /// Every request it received, as its command name and first key.
    pub(crate) log: Vec<(String, Vec<u8>)>,
    /// Bytes of a request not complete yet.
    pending: Vec<u8>,
}

impl SimServer {
    pub(crate) fn new(delay: Duration, behaviour: Behaviour) -> SimServer {
        SimServer {
            data: HashMap::new(),
            delay,
            behaviour,
            answered: 0,
            log: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub(super) fn dead(&self) -> bool {
        match self.behaviour {
            Behaviour::Refuses => true,
            Behaviour::DiesAfter(n) => self.answered >= n,
            _ => false,
        }
    }

    /// Answers the complete requests of `bytes`; None once it closed the connection.
    pub(super) fn answer(&mut self, bytes: &[u8], redis: bool) -> (Vec<u8>, bool) {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            if self.dead() {
                self.pending.clear();
                return (out, true);
            }
            let used = if redis {
                self.answer_resp(&mut out)
            } else {
                self.answer_memcached(&mut out)
            };
            let Some(used) = used else { break };
            self.pending.drain(..used);
            self.answered += 1;
        }
        (out, false)
    }

    fn answer_memcached(&mut self, out: &mut Vec<u8>) -> Option<usize> {
        let (request, used) = parse_request(&self.pending, &Limits::default()).ok()?;
        let mut reply = Vec::new();
        match request {
            Parsed::Get(get) => {
                let keys: Vec<&[u8]> = get.keys.iter().collect();
                self.log.push(("get".into(), keys[0].to_vec()));
                for key in keys {
                    if let Some(v) = self.data.get(key) {
                        reply.extend_from_slice(b"VALUE ");
                        reply.extend_from_slice(key);
                        reply.extend_from_slice(format!(" 0 {}\r\n", v.len()).as_bytes());
                        reply.extend_from_slice(v);
                        reply.extend_from_slice(b"\r\n");
                    }
                }
                reply.extend_from_slice(b"END\r\n");
            }
            Parsed::Store(store) => {
                self.log.push(("set".into(), store.key.to_vec()));
                if self.behaviour == Behaviour::RefusesWrites || store.op != StoreOp::Set {
                    reply.extend_from_slice(b"NOT_STORED\r\n");
                } else {
                    self.data.insert(store.key.to_vec(), store.data.to_vec());
                    reply.extend_from_slice(b"STORED\r\n");
                }
            }
            Parsed::Delete(delete) => {
                self.log.push(("delete".into(), delete.key.to_vec()));
                let found = self.data.remove(delete.key).is_some();
                reply.extend_from_slice(if found {
                    b"DELETED\r\n"
                } else {
                    b"NOT_FOUND\r\n"
                });
            }
            _ => reply.extend_from_slice(b"ERROR\r\n"),
        }
        self.put(out, &reply, b"ERROR\r\n");
        Some(used)
    }

    fn answer_resp(&mut self, out: &mut Vec<u8>) -> Option<usize> {
        let (command, used) = parse_command(&self.pending, &RespLimits::default()).ok()?;
        let name = String::from_utf8_lossy(command.name().unwrap_or(b"")).to_ascii_uppercase();
        let key = command.arg(1).unwrap_or(b"").to_vec();
        self.log.push((name.to_ascii_lowercase(), key.clone()));
        let bulk = |v: Option<&Vec<u8>>| match v {
            Some(v) => {
                let mut b = format!("${}\r\n", v.len()).into_bytes();
                b.extend_from_slice(v);
                b.extend_from_slice(b"\r\n");
                b
            }
            None => b"$-1\r\n".to_vec(),
        };
        let reply = match name.as_str() {
            "GET" => bulk(self.data.get(&key)),
            "SET" if self.behaviour == Behaviour::RefusesWrites => b"-ERR read only\r\n".to_vec(),
            "SET" => {
                let value = command.arg(2).unwrap_or(b"").to_vec();
                self.data.insert(key, value);
                b"+OK\r\n".to_vec()
            }
            "MGET" => {
                let args = &command.args()[1..];
                let mut r = format!("*{}\r\n", args.len()).into_bytes();
                for k in args {
                    r.extend(bulk(self.data.get(&k[..])));
                }
                r
            }
            "DEL" => {
                let n = command.args()[1..]
                    .iter()
                    .filter(|k| self.data.remove(&k[..]).is_some())
                    .count();
                format!(":{n}\r\n").into_bytes()
            }
            _ => b"-ERR unknown command\r\n".to_vec(),
        };
        self.put(out, &reply, b"-ERR garbage\r\n");
        Some(used)
    }

    fn put(&self, out: &mut Vec<u8>, reply: &[u8], garbage: &[u8]) {
        match self.behaviour {
            Behaviour::Garbage => out.extend_from_slice(garbage),
            Behaviour::Silent => {}
            Behaviour::Twice => {
                out.extend_from_slice(reply);
                out.extend_from_slice(reply);
            }
            _ => out.extend_from_slice(reply),
        }
    }
}
