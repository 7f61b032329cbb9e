//! Where the proxy listens and where its servers are: a TCP address or a Unix socket
//! path (twemproxy takes both, for listeners and for servers).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::task::{Context, Poll};

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

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

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp(addr) => addr.fmt(f),
            Endpoint::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Who is at the other end of a client connection.
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

/// A bound listener. A Unix socket's file is removed when the listener is dropped.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, UnlinkOnDrop),
}

/// A freshly accepted client connection.
#[derive(Debug)]
pub enum Accepted {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Self {
        Listener::Tcp(listener)
    }
}

impl Listener {
    /// Binds `endpoint`. A Unix socket file left by a process that is gone (nobody
    /// accepts on it) is replaced; `mode` sets the socket file's permissions.
    pub async fn bind(endpoint: &Endpoint, mode: u32) -> io::Result<Listener> {
        match endpoint {
            Endpoint::Tcp(addr) => Ok(Listener::Tcp(TcpListener::bind(addr).await?)),
            Endpoint::Unix(path) => {
                remove_stale_socket(path).await?;
                let listener = UnixListener::bind(path)?;
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
                Ok(Listener::Unix(listener, UnlinkOnDrop(path.clone())))
            }
        }
    }

    /// Where it listens, with the port chosen for port 0.
    pub fn local(&self) -> io::Result<Endpoint> {
        match self {
            Listener::Tcp(l) => Ok(Endpoint::Tcp(l.local_addr()?)),
            Listener::Unix(_, path) => Ok(Endpoint::Unix(path.0.clone())),
        }
    }

    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(Accepted, Peer)>> {
        match self {
            Listener::Tcp(l) => l
                .poll_accept(cx)
                .map_ok(|(stream, peer)| (Accepted::Tcp(stream), Peer::Tcp(peer))),
            Listener::Unix(l, _) => l
                .poll_accept(cx)
                .map_ok(|(stream, _)| (Accepted::Unix(stream), Peer::Unix)),
        }
    }
}

/// Removes a Unix listener's socket file when the listener goes.
#[derive(Debug)]
pub struct UnlinkOnDrop(PathBuf);

impl Drop for UnlinkOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A socket file nobody accepts on is left over from a process that died: remove it
/// (memcached and twemproxy do the same). Anything else at the path is left alone and
/// the bind fails with its own error.
async fn remove_stale_socket(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_socket() {
        return Ok(());
    }
    match UnixStream::connect(path).await {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("{} is in use by another process", path.display()),
        )),
        Err(_) => std::fs::remove_file(path),
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
    }

    #[tokio::test]
    async fn a_stale_socket_file_is_replaced_and_a_live_one_refused() {
        let dir = tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap();
        let path = dir.path().join("p.sock");
        let endpoint = Endpoint::Unix(path.clone());
        let first = Listener::bind(&endpoint, 0o700).await.unwrap();
        let err = Listener::bind(&endpoint, 0o700).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        // A socket file whose listener is gone (std's listener leaves its file).
        drop(first);
        assert!(!path.exists(), "the listener removes its socket file");
        let stale = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop(stale);
        assert!(path.exists());
        let again = Listener::bind(&endpoint, 0o700).await.unwrap();
        assert_eq!(again.local().unwrap(), endpoint);
    }
}
