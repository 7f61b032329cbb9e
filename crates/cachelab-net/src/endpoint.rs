//! Where to listen or connect: a TCP address or a Unix socket path (twemproxy takes
//! both, for listeners and for servers; memtier and our load generator take both for
//! the server), and who is at the other end of an accepted connection.

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;

use thiserror::Error;

/// Why a text is not an endpoint.
#[derive(Debug, Error)]
pub enum EndpointError {
    #[error("{0:?} is not host:port or a Unix socket path")]
    NotHostPort(String),
    #[error("{text:?} did not resolve: {source}")]
    Unresolved { text: String, source: io::Error },
}

/// A TCP address or a Unix socket path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Endpoint {
    /// A path (starting with `/`, or `unix:` and a path) names a Unix socket.
    pub fn unix_path(text: &str) -> Option<PathBuf> {
        let path = text.strip_prefix("unix:").unwrap_or(text);
        path.starts_with('/').then(|| PathBuf::from(path))
    }

    /// A Unix socket path or a numeric `ip:port` (`[v6]:port`); no name is looked up
    /// (see [`Endpoint::resolve`]).
    pub fn parse(text: &str) -> Result<Endpoint, EndpointError> {
        if let Some(path) = Endpoint::unix_path(text) {
            return Ok(Endpoint::Unix(path));
        }
        text.parse()
            .map(Endpoint::Tcp)
            .map_err(|_| EndpointError::NotHostPort(text.to_string()))
    }

    /// A Unix socket path, or `host:port` with the host's addresses looked up: every
    /// address, IPv4 first (servers usually listen on IPv4 loopback while `localhost`
    /// may resolve to `::1` first).
    pub fn resolve(text: &str) -> Result<Vec<Endpoint>, EndpointError> {
        if let Some(path) = Endpoint::unix_path(text) {
            return Ok(vec![Endpoint::Unix(path)]);
        }
        if !text.contains(':') {
            return Err(EndpointError::NotHostPort(text.to_string()));
        }
        let mut addrs: Vec<SocketAddr> = text
            .to_socket_addrs()
            .map_err(|source| EndpointError::Unresolved {
                text: text.to_string(),
                source,
            })?
            .collect();
        addrs.sort_by_key(SocketAddr::is_ipv6);
        if addrs.is_empty() {
            return Err(EndpointError::NotHostPort(text.to_string()));
        }
        Ok(addrs.into_iter().map(Endpoint::Tcp).collect())
    }

    /// The TCP port, if a TCP endpoint (0 asks for a free one).
    pub fn port(&self) -> Option<u16> {
        match self {
            Endpoint::Tcp(addr) => Some(addr.port()),
            Endpoint::Unix(_) => None,
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Endpoint::Unix(_))
    }

    /// Whether a connection or a listener can use this address: a Unix socket path must
    /// fit in `sun_path` (see [`max_unix_path_len`]); a TCP address always can.
    pub fn fits_sun_path(&self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        match self {
            Endpoint::Tcp(_) => true,
            Endpoint::Unix(path) => path.as_os_str().as_bytes().len() <= max_unix_path_len(),
        }
    }
}

/// The longest Unix socket path the kernel takes: `sun_path` holds it with its
/// terminating NUL (108 bytes on Linux, so 107). A longer one fails only when used.
pub fn max_unix_path_len() -> usize {
    // SAFETY: sockaddr_un is plain old data, for which all zeros is a valid value.
    let addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_path.len() - 1
}

impl From<SocketAddr> for Endpoint {
    fn from(addr: SocketAddr) -> Self {
        Endpoint::Tcp(addr)
    }
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Endpoint::parse(text)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(addr) => addr.fmt(f),
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Who is at the other end of an accepted connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    /// A Unix socket client (they have no address worth showing).
    Unix,
}

impl From<SocketAddr> for Peer {
    fn from(addr: SocketAddr) -> Self {
        Peer::Tcp(addr)
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Tcp(addr) => addr.fmt(f),
            Peer::Unix => f.write_str("unix"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_or_unix_prefix_names_a_unix_socket() {
        assert_eq!(
            Endpoint::unix_path("/tmp/m.sock"),
            Some(PathBuf::from("/tmp/m.sock"))
        );
        assert_eq!(
            Endpoint::unix_path("unix:/tmp/m.sock"),
            Some(PathBuf::from("/tmp/m.sock"))
        );
        assert_eq!(Endpoint::unix_path("127.0.0.1:11211"), None);
        assert_eq!(Endpoint::unix_path("unix:relative"), None);
    }

    #[test]
    fn a_unix_path_fits_in_sun_path_up_to_107_bytes() {
        assert_eq!(max_unix_path_len(), 107);
        let path = |len: usize| Endpoint::Unix(format!("/{}", "a".repeat(len - 1)).into());
        assert!(path(107).fits_sun_path());
        assert!(!path(108).fits_sun_path());
        assert!(Endpoint::parse("127.0.0.1:1").unwrap().fits_sun_path());
    }

    #[test]
    fn parsing_reads_back_what_display_writes() {
        for text in ["127.0.0.1:11211", "[::1]:6379", "/run/memcached.sock"] {
            let endpoint: Endpoint = text.parse().unwrap();
            assert_eq!(endpoint.to_string(), text);
        }
        assert_eq!(
            Endpoint::parse("unix:/tmp/r.sock").unwrap(),
            Endpoint::Unix("/tmp/r.sock".into())
        );
        assert_eq!(Endpoint::parse("127.0.0.1:0").unwrap().port(), Some(0));
        assert!(Endpoint::parse("/tmp/r.sock").unwrap().is_unix());
    }

    #[test]
    fn a_name_is_an_error_when_parsing_and_looked_up_when_resolving() {
        let e = Endpoint::parse("localhost:11211").unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"localhost:11211\" is not host:port or a Unix socket path"
        );
        let all = Endpoint::resolve("localhost:11211").unwrap();
        assert!(!all.is_empty());
        assert!(all.iter().all(|e| e.port() == Some(11211)));
        let v4_first = all
            .iter()
            .position(|e| matches!(e, Endpoint::Tcp(a) if a.is_ipv4()));
        if let Some(v4) = v4_first {
            assert_eq!(v4, 0, "IPv4 addresses come first: {all:?}");
        }
        assert!(matches!(
            Endpoint::resolve("no-port"),
            Err(EndpointError::NotHostPort(_))
        ));
        assert_eq!(
            Endpoint::resolve("unix:/tmp/x.sock").unwrap(),
            [Endpoint::Unix("/tmp/x.sock".into())]
        );
    }

    #[test]
    fn a_peer_shows_its_address_or_unix() {
        assert_eq!(Peer::Unix.to_string(), "unix");
        let addr: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        assert_eq!(Peer::from(addr).to_string(), "10.0.0.1:5000");
    }
}
