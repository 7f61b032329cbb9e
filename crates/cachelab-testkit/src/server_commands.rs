//! The command lines of memcached and redis-server as the tests start them, plain or
//! serving TLS with a certificate from [`crate::pki`] (Debian's memcached is built with
//! TLS, `-Z`; redis-server with `--tls-port`): both binaries' TLS tests start the same
//! servers. The caller adds where to listen if it is not a TLS port, spawns, and waits.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::pki::Issued;

/// What a TLS server serves and whom it lets in.
#[derive(Clone, Copy)]
pub struct TlsListen<'a> {
    pub cert: &'a Issued,
    /// The CA that client certificates must chain to.
    pub ca: &'a Path,
    /// Mutual TLS: clients without a certificate from `ca` are refused.
    pub require_client_cert: bool,
}

/// memcached with one worker thread, 64 MB, no UDP, its output discarded (and told to
/// run as root when we are root, which it otherwise refuses).
pub fn memcached_command() -> Command {
    let mut cmd = Command::new("memcached");
    cmd.args(["-U", "0", "-t", "1", "-m", "64"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if unsafe { libc::geteuid() } == 0 {
        cmd.args(["-u", "root"]);
    }
    cmd
}

/// `memcached -Z` serving TLS on 127.0.0.1:`port`.
pub fn memcached_tls(port: u16, tls: TlsListen) -> Command {
    let mut options = format!(
        "ssl_chain_cert={},ssl_key={}",
        tls.cert.cert.display(),
        tls.cert.key.display()
    );
    if tls.require_client_cert {
        // ssl_verify_mode 3: SSL_VERIFY_PEER | FAIL_IF_NO_PEER_CERT.
        options += &format!(",ssl_ca_cert={},ssl_verify_mode=3", tls.ca.display());
    }
    let mut cmd = memcached_command();
    cmd.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-Z", "-o"])
        .arg(options);
    cmd
}

/// redis-server without persistence or protected mode, on no TCP port yet, its output
/// discarded.
pub fn redis_command() -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .args(["--port", "0", "--bind", "127.0.0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// redis-server serving TLS only, on 127.0.0.1:`port`.
pub fn redis_tls(port: u16, tls: TlsListen) -> Command {
    let mut cmd = redis_command();
    cmd.args(["--tls-port", &port.to_string()])
        .arg("--tls-cert-file")
        .arg(&tls.cert.cert)
        .arg("--tls-key-file")
        .arg(&tls.cert.key)
        .arg("--tls-ca-cert-file")
        .arg(tls.ca)
        .args([
            "--tls-auth-clients",
            if tls.require_client_cert { "yes" } else { "no" },
        ]);
    cmd
}
