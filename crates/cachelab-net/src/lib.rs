//! The transport both binaries use, so that the middleware and the load generator
//! speak TLS, name addresses and retry connections the same way:
//!
//! - [`tls`]: the TLS settings and the rustls configurations built from them: one
//!   `--tls-protocols` parser ([`tls::Protocols`]), one PEM certificate and key loader,
//!   the skip-verify verifier, a listener's and a client's configuration builders.
//! - [`endpoint`]: where to listen or connect, a TCP address or a Unix socket path.
//! - [`backoff`]: how long to wait before the next connection attempt (pure, time
//!   passed in).
//! - [`stream`]: a nonblocking byte stream over TCP or a Unix socket, plain or TLS
//!   (rustls's sans-I/O session), for the event loops; its [`stream::session`]
//!   functions drive every TLS session of both binaries (the proxy's loop on both hops,
//!   the load generator's connections).
//!
//! No runtime: nothing here blocks or spawns; files are read when a configuration is
//! built, and the callers own their sockets.

pub mod backoff;
pub mod endpoint;
pub mod stream;
pub mod tls;
