//! Where a key lives in a pool of servers, computed as twemproxy computes it: its key
//! hashes ([`hash`]) and its distributions ([`ring`]: ketama, modula, random). The
//! middleware routes with them; the load generator shards with them (`--shard`), so a
//! "direct" baseline puts every key on the server the proxy would.

pub mod hash;
pub mod ring;
