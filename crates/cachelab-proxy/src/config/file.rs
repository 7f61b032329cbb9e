//! `--config FILE`: listeners and their pools, from cachelab's TOML or from twemproxy's
//! `nutcracker.yml` as it is (chosen by the extension: `.yml`/`.yaml` is nutcracker's).
//!
//! cachelab's format, one table per pool:
//!
//! ```toml
//! [pools.main]
//! listen = "127.0.0.1:22121"
//! mode = "shard"              # or "replicate" (every server holds every key)
//! replicas = 2                # shard: each key on 2 consecutive ring servers
//! read_policy = "round-robin" # or "primary": which replica a read goes to
//! hash = "fnv1a_64"           # any twemproxy hash
//! distribution = "ketama"     # ketama, modula, random
//! hash_tag = "{}"
//! timeout_ms = 1000
//! failure_limit = 2           # failures in a row that eject a server (0: never)
//! auto_eject = true           # shard: an ejected server's keys go to the next one
//! split_multiget = false      # replicate: `-s`
//! servers = ["127.0.0.1:11211:1 alpha", "127.0.0.1:11311:1 beta"]
//! ```
//!
//! Servers are written as in nutcracker.yml: `host:port[:weight] [name]`, or a Unix
//! socket `/path[:weight] [name]`; `listen` may be a Unix socket path too.
//!
//! A file is read only up to [`MAX_CONFIG_BYTES`], YAML aliases are refused (see
//! [`super::yaml`]), and everything after the read is linear in the number of
//! servers (each host name is resolved once), so no file can make start-up or a reload
//! take minutes or gigabytes.
//!
//! TLS (TOML only: no twemproxy fork defines TLS keys for nutcracker.yml), per pool;
//! relative paths are taken from the file's directory (see docs/tls.md):
//!
//! ```toml
//! [pools.main.tls]            # served to clients
//! cert = "proxy.pem"
//! key = "proxy.key"
//! client_ca = "clients-ca.pem"  # mutual TLS (optional)
//! protocols = "1.2,1.3"
//! [pools.main.server_tls]     # towards the pool's servers
//! ca = "servers-ca.pem"       # or skip_verify = true
//! sni = "cache.example"       # default: each server's host
//! cert = "proxy-client.pem"   # optional client certificate
//! key = "proxy-client.key"
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;

use super::fields::Defaults;
use super::nutcracker::parse_nutcracker;
use super::spec::ListenerSpec;
use super::toml::parse_toml;

/// Why a configuration file was refused: the file and the reason, naming the pool and
/// the field.
#[derive(Debug, Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{path}: larger than {} MiB, the limit for a config file", MAX_CONFIG_BYTES >> 20)]
    TooLarge { path: String },
}

/// Largest config file read. A nutcracker.yml is a few KiB (1,000 servers are about
/// 40 KiB); 4 MiB holds some 100,000 server lines while bounding what a file can cost:
/// the parsed tree, and a ketama ring of 160 points per server.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// The text of `path`, refused past [`MAX_CONFIG_BYTES`] without reading further (the
/// length is checked on what is read, not on the metadata, so a FIFO or a file growing
/// under us is bounded too).
fn read_bounded(path: &Path) -> Result<String, FileError> {
    let display = || path.display().to_string();
    let read_error = |source| FileError::Read {
        path: display(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(FileError::TooLarge { path: display() });
    }
    String::from_utf8(bytes).map_err(|e| FileError::Invalid {
        path: display(),
        message: format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()),
    })
}

/// Reads the listeners and pools of `path`. `timeout` and `failure_limit` are the
/// defaults for pools that do not set them.
pub fn load(
    path: &Path,
    timeout: Duration,
    failure_limit: u32,
) -> Result<Vec<ListenerSpec>, FileError> {
    let text = read_bounded(path)?;
    let defaults = Defaults {
        timeout,
        failure_limit,
    };
    let yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yml" | "yaml")
    );
    let parsed = if yaml {
        parse_nutcracker(&text, &defaults)
    } else {
        parse_toml(&text, &defaults)
    };
    let mut listeners = parsed.map_err(|message| FileError::Invalid {
        path: path.display().to_string(),
        message,
    })?;
    if let Some(dir) = path.parent() {
        relative_to(dir, &mut listeners);
    }
    if listeners.is_empty() {
        return Err(FileError::Invalid {
            path: path.display().to_string(),
            message: "no pools".into(),
        });
    }
    Ok(listeners)
}

/// TLS file names that are relative are taken from the configuration file's directory.
fn relative_to(dir: &Path, listeners: &mut [ListenerSpec]) {
    let fix = |p: &mut PathBuf| {
        if p.is_relative() {
            *p = dir.join(&*p);
        }
    };
    for l in listeners {
        if let Some(tls) = &mut l.tls {
            fix(&mut tls.cert);
            fix(&mut tls.key);
            tls.client_ca.iter_mut().for_each(fix);
        }
        if let Some(tls) = &mut l.pool.server_tls {
            tls.ca.iter_mut().for_each(fix);
            tls.cert.iter_mut().for_each(fix);
            tls.key.iter_mut().for_each(fix);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::toml::parse_toml;
    use super::*;
    use crate::endpoint::Endpoint;

    fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn load_file(path: &Path) -> Result<Vec<ListenerSpec>, FileError> {
        load(path, Duration::from_millis(1000), 2)
    }

    /// A nutcracker.yml of `n` servers, all on one address under their own names (the
    /// shortest lines: the most servers a file of a given size can hold).
    fn many_servers(n: usize) -> String {
        let mut text = String::from("alpha:\n  listen: 127.0.0.1:0\n  servers:\n");
        for i in 0..n {
            text.push_str(&format!("  - 127.0.0.1:11211:1 s{i}\n"));
        }
        text
    }

    #[test]
    fn a_file_past_the_size_limit_is_refused_by_name() {
        let mut text = many_servers(1);
        text.push_str(&"#".repeat(MAX_CONFIG_BYTES as usize + 1 - text.len()));
        let (_dir, path) = temp_file("big.yml", &text);
        let err = load_file(&path).unwrap_err();
        assert!(matches!(err, FileError::TooLarge { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "{}: larger than 4 MiB, the limit for a config file",
                path.display()
            )
        );
        // One byte less is read (a comment): the limit is the size, not a rounding.
        text.pop();
        let (_dir, path) = temp_file("fits.yml", &text);
        assert_eq!(load_file(&path).unwrap()[0].pool.servers.len(), 1);
    }

    #[test]
    fn a_hundred_thousand_servers_load_and_build_a_pool() {
        let n = 100_000;
        let text = many_servers(n);
        assert!(text.len() as u64 <= MAX_CONFIG_BYTES, "{}", text.len());
        let (_dir, path) = temp_file("many.yml", &text);
        let listeners = load_file(&path).unwrap();
        let spec = &listeners[0].pool;
        assert_eq!(spec.servers.len(), n);
        let health = crate::health::Health::new(&[], 2);
        let pool = crate::pool_build::build_pool(spec, &health).unwrap();
        // One address under many names: one server to the health registry, every name
        // on the ring.
        assert_eq!(health.len(), 1);
        assert_eq!(pool.servers.len(), n);
        assert!(pool.servers.iter().all(|s| s.id == 0));
    }

    #[test]
    fn tls_tables_and_unix_sockets_in_toml() {
        let toml = "[pools.main]\nlisten = \"127.0.0.1:0\"\nservers = [\"127.0.0.1:1\"]\n\
                    [pools.main.tls]\ncert = \"c.pem\"\nkey = \"/k/k.pem\"\nclient_ca = \"ca.pem\"\n\
                    [pools.main.server_tls]\nca = \"s.pem\"\nsni = \"cache\"\n\
                    [pools.local]\nlisten = \"/tmp/cachelab-p.sock\"\n\
                    servers = [\"/tmp/cachelab-m.sock:2 m\"]\n";
        let mut l = parse_toml(toml, &Defaults::for_tests()).unwrap();
        relative_to(Path::new("/etc/cachelab"), &mut l);
        let (local, main) = (&l[0], &l[1]);
        assert_eq!(local.listen, Endpoint::Unix("/tmp/cachelab-p.sock".into()));
        assert_eq!(
            local.pool.servers[0].addr,
            Endpoint::Unix("/tmp/cachelab-m.sock".into())
        );
        assert_eq!(
            (
                local.pool.servers[0].weight,
                local.pool.servers[0].name.as_str()
            ),
            (2, "m")
        );
        let tls = main.tls.as_ref().unwrap();
        assert_eq!(tls.cert, Path::new("/etc/cachelab/c.pem"));
        assert_eq!(tls.key, Path::new("/k/k.pem"));
        let server = main.pool.server_tls.as_ref().unwrap();
        assert_eq!(server.ca.as_deref(), Some(Path::new("/etc/cachelab/s.pem")));
        let no_ca = "[pools.a]\nlisten = \"127.0.0.1:0\"\nservers = [\"127.0.0.1:1\"]\n\
                     [pools.a.server_tls]\nsni = \"x\"\n";
        let err = parse_toml(no_ca, &Defaults::for_tests()).unwrap_err();
        assert!(err.contains("needs ca"), "{err}");
        let unix_tls =
            "[pools.a]\nlisten = \"/tmp/cachelab-a.sock\"\nservers = [\"127.0.0.1:1\"]\n\
                        [pools.a.tls]\ncert = \"c\"\nkey = \"k\"\n";
        let err = parse_toml(unix_tls, &Defaults::for_tests()).unwrap_err();
        assert!(err.contains("Unix socket listener"), "{err}");
    }
}
