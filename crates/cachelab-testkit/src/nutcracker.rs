//! Debian's nutcracker (twemproxy), the peer the middleware and the load generator's
//! client-side sharding are held to.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::free_port;

/// Debian's nutcracker on a free port, killed on drop.
pub struct Nutcracker {
    pub addr: SocketAddr,
    child: Child,
}

impl Nutcracker {
    /// Starts nutcracker on `conf`. If it exits at start (its listen or stats port was
    /// taken meanwhile), the file's `listen:` port is replaced by another free one and
    /// it is started again, up to 5 times.
    pub fn start(conf: &Path) -> Nutcracker {
        let dir = conf.parent().unwrap();
        for attempt in 0..5 {
            let mut text = std::fs::read_to_string(conf).unwrap();
            if attempt > 0 {
                text = with_listen_port(&text, free_port());
                std::fs::write(conf, &text).unwrap();
            }
            let listen = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("listen: "))
                .unwrap();
            let addr: SocketAddr = listen.parse().unwrap();
            let mut child = Command::new("nutcracker")
                .arg("-c")
                .arg(conf)
                .args(["-s", &free_port().to_string(), "-a", "127.0.0.1"])
                .arg("-o")
                .arg(dir.join("nutcracker.log"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("cannot run nutcracker (`make deps` installs it)");
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if TcpStream::connect(addr).is_ok() {
                    return Nutcracker { addr, child };
                }
                if child.try_wait().unwrap().is_some() {
                    break; // a port was taken: another one
                }
                assert!(Instant::now() < deadline, "nutcracker did not start");
                thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("nutcracker exited at start 5 times (see {})", dir.display());
    }
}

/// `text` (a nutcracker.yml) listening on `port` instead.
fn with_listen_port(text: &str, port: u16) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.split_once("listen: ") {
            Some((indent, addr)) if indent.trim().is_empty() => {
                let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
                out.push_str(&format!("{indent}listen: {host}:{port}"));
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_listen_port_is_replaced() {
        let text = "pool:\n  listen: 127.0.0.1:1000\n  hash: md5\n";
        assert_eq!(
            super::with_listen_port(text, 2000),
            "pool:\n  listen: 127.0.0.1:2000\n  hash: md5\n"
        );
    }
}
