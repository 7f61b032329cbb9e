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
    pub fn start(conf: &Path) -> Nutcracker {
        let dir = conf.parent().unwrap();
        let child = Command::new("nutcracker")
            .arg("-c")
            .arg(conf)
            .args(["-s", &free_port().to_string(), "-a", "127.0.0.1"])
            .arg("-o")
            .arg(dir.join("nutcracker.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run nutcracker (`make deps` installs it)");
        let text = std::fs::read_to_string(conf).unwrap();
        let listen = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("listen: "))
            .unwrap();
        let addr: SocketAddr = listen.parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "nutcracker did not start");
            thread::sleep(Duration::from_millis(20));
        }
        Nutcracker { addr, child }
    }
}

impl Drop for Nutcracker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
