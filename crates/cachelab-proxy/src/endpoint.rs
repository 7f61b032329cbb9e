//! The proxy's listeners (tokio): a TCP address or a Unix socket path bound, and the
//! connections they accept. The addresses themselves are `cachelab-net`'s
//! [`Endpoint`] and [`Peer`], shared with the load generator.

use std::io;
use std::path::{Path, PathBuf};
use std::task::{Context, Poll};

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

pub use cachelab_net::endpoint::{max_unix_path_len, Endpoint, Peer};

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
