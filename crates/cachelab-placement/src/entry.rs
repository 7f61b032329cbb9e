//! A server as nutcracker.yml lists it, `host:port[:weight] [name]` or
//! `/path/to.sock[:weight] [name]`, read from the end as nutcracker reads it, and the
//! name its ketama points are hashed from when it has none. Text only: resolving the
//! host is the caller's.

use std::fmt;
use std::path::PathBuf;

/// Where a listed server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

/// One entry of a pool's server list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub address: Address,
    pub weight: u32,
    /// The name hashed onto the ketama ring: the one given, or [`ketama_name`]'s.
    pub name: String,
}

/// Why an entry could not be read; it shows the entry and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryError(String);

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EntryError {}

/// twemproxy's name for a server without one: `host:port`, or `host` for port 11211.
pub fn ketama_name(host: &str, port: u16) -> String {
    if port == 11211 {
        host.to_string()
    } else {
        format!("{host}:{port}")
    }
}

/// The path of a Unix socket written as `/path` or `unix:/path`.
pub fn unix_path(text: &str) -> Option<PathBuf> {
    let path = text.strip_prefix("unix:").unwrap_or(text);
    path.starts_with('/').then(|| PathBuf::from(path))
}

impl Entry {
    pub fn parse(text: &str) -> Result<Entry, EntryError> {
        let text = text.trim();
        let fail = |what: String| EntryError(format!("server {text:?}: {what}"));
        let (address, name) = match text.split_once(' ') {
            Some((a, n)) if !n.trim().is_empty() => (a, Some(n.trim().to_string())),
            _ => (text, None),
        };
        if let Some(path) = unix_path(address) {
            // twemproxy's `/path:weight`: the weight is what follows the last colon.
            let (path, weight) = match path.to_str().and_then(|p| p.rsplit_once(':')) {
                Some((p, w)) if w.parse::<u32>().is_ok() => {
                    (PathBuf::from(p), w.parse().unwrap_or(1))
                }
                _ => (path, 1),
            };
            if weight == 0 {
                return Err(fail("weight must be at least 1".into()));
            }
            let shown = path.display().to_string();
            return Ok(Entry {
                address: Address::Unix(path),
                weight,
                name: name.unwrap_or(shown),
            });
        }
        let parts: Vec<&str> = address.rsplitn(3, ':').collect();
        let (host, port, weight) = match parts.as_slice() {
            [weight, port, host]
                if weight.parse::<u32>().is_ok() && port.parse::<u16>().is_ok() =>
            {
                (*host, *port, *weight)
            }
            [port, host] => (*host, *port, "1"),
            [weight, port, host] => {
                // `host:port` where host has a colon (IPv6) is not supported; say which
                // part is wrong.
                return Err(fail(format!(
                    "expected host:port[:weight], got port {port:?} and weight {weight:?} \
                     after {host:?}"
                )));
            }
            _ => return Err(fail("expected host:port[:weight] [name]".into())),
        };
        if host.is_empty() {
            return Err(fail("no host before the port".into()));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| fail(format!("invalid port {port:?}")))?;
        let weight: u32 = weight
            .parse()
            .map_err(|_| fail(format!("invalid weight {weight:?}")))?;
        if weight == 0 {
            return Err(fail("weight must be at least 1".into()));
        }
        Ok(Entry {
            name: name.unwrap_or_else(|| ketama_name(host, port)),
            address: Address::Tcp {
                host: host.to_string(),
                port,
            },
            weight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_like_nutcrackers_with_its_default_names() {
        let e = Entry::parse("127.0.0.1:11311:2 beta").unwrap();
        assert_eq!((e.name.as_str(), e.weight), ("beta", 2));
        assert_eq!(
            Entry::parse("127.0.0.1:11311:1").unwrap().name,
            "127.0.0.1:11311"
        );
        assert_eq!(Entry::parse("127.0.0.1:11211:1").unwrap().name, "127.0.0.1");
        let plain = Entry::parse("localhost:11311").unwrap();
        assert_eq!(plain.weight, 1);
        assert_eq!(
            plain.address,
            Address::Tcp {
                host: "localhost".into(),
                port: 11311
            }
        );
        let unix = Entry::parse("/tmp/mc.sock:3").unwrap();
        assert_eq!(
            (unix.address, unix.weight, unix.name.as_str()),
            (Address::Unix("/tmp/mc.sock".into()), 3, "/tmp/mc.sock")
        );
    }

    #[test]
    fn a_bad_entry_is_named_with_its_fault() {
        for (text, fault) in [
            ("127.0.0.1:11311:0", "weight must be at least 1"),
            ("127.0.0.1", "expected host:port"),
            ("127.0.0.1:http", "invalid port"),
            (":11211", "no host"),
            ("::1:11211:x", "expected host:port[:weight], got port"),
        ] {
            let err = Entry::parse(text).unwrap_err().to_string();
            assert!(err.contains(fault) && err.contains(text), "{text}: {err}");
        }
    }
}
