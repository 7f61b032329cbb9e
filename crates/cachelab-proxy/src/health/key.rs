//! What makes a server one server to the proxy: its address, what its connections say
//! first (the pool's protocol, Redis password and database), and its TLS settings as
//! configured. Two pools naming one address share the server's connections (and its
//! health) only when all of these are equal; otherwise each gets a server of its own,
//! so a pool's connections never carry another pool's `SELECT` or `AUTH`.
//!
//! A reload that keeps every setting keeps the id (and the open connections); one that
//! changes the database or password gets another id, whose connections are opened and
//! greeted with the new settings before their first request. Changing back finds the
//! first id again, so flipping a setting does not use up the registry.

use std::fmt;

use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::tls::ServerTlsSpec;

/// A server's identity in the [`super::Health`] registry.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ServerKey {
    pub addr: Endpoint,
    pub dialect: Dialect,
    /// The TLS settings as configured (not the files' contents: a reload rereads them
    /// for the same id), with the name verified in the certificate.
    pub tls: Option<TlsKey>,
}

/// A server's TLS settings: the spec and the name its certificate must carry (the SNI
/// if set, else the host as written, so `localhost` and `127.0.0.1` stay apart).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TlsKey {
    pub spec: ServerTlsSpec,
    pub name: String,
}

impl ServerKey {
    /// A memcached server without TLS: the command line's default pool.
    pub fn plain(addr: Endpoint) -> ServerKey {
        ServerKey {
            addr,
            dialect: Dialect::Memcached,
            tls: None,
        }
    }

    /// The settings that tell this server apart from others at its address, for
    /// reports: `db5`, `auth`, `tls`, joined by `/` (empty when there are none). The
    /// password itself is never shown.
    pub fn settings(&self) -> String {
        let mut parts = Vec::new();
        if let Dialect::Redis { auth, db } = &self.dialect {
            if *db != 0 {
                parts.push(format!("db{db}"));
            }
            if auth.is_some() {
                parts.push("auth".to_string());
            }
        }
        if self.tls.is_some() {
            parts.push("tls".to_string());
        }
        parts.join("/")
    }
}

/// The address, then the distinguishing settings (`127.0.0.1:6379/db5/auth`).
impl fmt::Display for ServerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings = self.settings();
        if settings.is_empty() {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{settings}", self.addr)
        }
    }
}

/// Like `Display`, with the protocol: a key is logged, so the password must not be.
impl fmt::Debug for ServerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let protocol = match self.dialect {
            Dialect::Memcached => "memcached",
            Dialect::Redis { .. } => "redis",
        };
        write!(f, "{protocol} {self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn redis(addr: &str, auth: Option<&str>, db: u32) -> ServerKey {
        ServerKey {
            addr: Endpoint::Tcp(addr.parse().unwrap()),
            dialect: Dialect::Redis {
                auth: auth.map(str::to_owned),
                db,
            },
            tls: None,
        }
    }

    #[test]
    fn one_address_with_another_database_or_password_is_another_server() {
        let a = redis("127.0.0.1:6379", None, 0);
        let keys: HashSet<ServerKey> = [
            a.clone(),
            redis("127.0.0.1:6379", None, 5),
            redis("127.0.0.1:6379", Some("pw"), 0),
            redis("127.0.0.1:6379", Some("other"), 0),
            ServerKey::plain(a.addr.clone()),
            redis("127.0.0.1:6380", None, 0),
        ]
        .into_iter()
        .collect();
        assert_eq!(keys.len(), 6);
        assert!(keys.contains(&redis("127.0.0.1:6379", None, 0)));
    }

    #[test]
    fn tls_settings_as_configured_are_part_of_the_identity() {
        let plain = redis("127.0.0.1:6379", None, 0);
        let spec = ServerTlsSpec {
            skip_verify: true,
            ..ServerTlsSpec::default()
        };
        let tls = |name: &str| ServerKey {
            tls: Some(TlsKey {
                spec: spec.clone(),
                name: name.into(),
            }),
            ..plain.clone()
        };
        assert_ne!(plain, tls("127.0.0.1"));
        assert_ne!(tls("127.0.0.1"), tls("localhost"));
        assert_eq!(tls("127.0.0.1"), tls("127.0.0.1"));
    }

    #[test]
    fn reports_show_the_database_and_never_the_password() {
        let key = redis("127.0.0.1:6379", Some("s3cret"), 5);
        assert_eq!(key.to_string(), "127.0.0.1:6379/db5/auth");
        assert_eq!(format!("{key:?}"), "redis 127.0.0.1:6379/db5/auth");
        assert_eq!(
            redis("127.0.0.1:6379", None, 0).to_string(),
            "127.0.0.1:6379"
        );
    }
}
