//! Where a key lives in a pool of servers, computed as twemproxy computes it: its key
//! hashes ([`hash`]), its distributions ([`ring`]: ketama, modula, random), the hash tag
//! and a key's server ([`place`]), and the server list as nutcracker.yml writes it
//! ([`entry`]). The middleware routes with them; the load generator shards with them
//! (`--shard`), so a "direct" baseline puts every key on the server the proxy would.

pub mod entry;
pub mod hash;
pub mod place;
pub mod ring;

pub use entry::{ketama_name, Entry};
pub use place::{tagged, twemproxy_order, Placement};
