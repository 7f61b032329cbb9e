//! Redis commands in a pool: pure, like the memcached routing beside it.
//!
//! - [`commands`]: the command table (which arguments are keys, read or write, how a
//!   multi-key command splits), the commands answered by the proxy itself, the ones
//!   refused because no key routes them, and the `-ERR` each refusal answers with.
//! - [`split`]: where a key goes (twemproxy's placement: the pool's hash of the key, or
//!   of its `hash_tag` part, on the pool's distribution), how a multi-key command is cut
//!   into one command per server, and how the parts' replies merge back (`MGET` values
//!   in key order, `DEL`/`UNLINK`/`EXISTS`/`TOUCH` counts summed, `MSET` `OK` when every
//!   part is).
//! - [`plan`]: a routed command's [`crate::routing::plan::Plan`] in a `replicate` or
//!   `shard` pool, and the per-server commands of a split one.

pub mod commands;
pub mod plan;
pub mod split;
