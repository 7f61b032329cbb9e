//! TLS towards the server, memtier_benchmark's `--tls` options: which versions
//! (`--tls-protocols`), which CA verifies the server (`--cacert`, or the system's bundle,
//! or none with `--tls-skip-verify`), the client's certificate (`--cert`, `--key`) and the
//! name asked for (`--sni`). The configuration is built by `cachelab-net` (shared with
//! the middleware); here the options become its settings, and its errors name the
//! option that gave the file. The runner drives the connection itself, so that TLS fits
//! its non-blocking loop.

use std::path::PathBuf;
use std::sync::Arc;

use cachelab_net::tls::{self as net, PemRole, ServerTlsSpec};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use thiserror::Error;

pub use cachelab_net::tls::Protocols;

/// Where the system's CA bundle is on Debian and its derivatives (OpenSSL's default,
/// which memtier uses when `--cacert` is not given); `SSL_CERT_FILE` overrides it.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The TLS options of a run, validated but not yet read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// The client's certificate chain and its key (mutual TLS), both or neither.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// The CA file that verifies the server; `None`: the system's bundle.
    pub cacert: Option<PathBuf>,
    /// Accept any server certificate (the handshake's signatures are still checked).
    pub skip_verify: bool,
    /// The name asked for and verified; `None`: the `--server` host.
    pub sni: Option<String>,
    pub protocols: Protocols,
}

/// Why the TLS options could not be used: the option that named the file, and why.
#[derive(Debug, Error)]
pub enum TlsError {
    #[error("--{option} {}: {reason}", path.display())]
    File {
        option: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("--tls: no CA to verify the server with ({SYSTEM_CA_BUNDLE} is missing): give --cacert FILE, or --tls-skip-verify")]
    NoSystemCa,
    #[error("--cert/--key: {0}")]
    ClientCert(rustls::Error),
    #[error("--tls-protocols: {0}")]
    Protocols(rustls::Error),
    #[error("--sni {name:?}: not a DNS name or IP address")]
    ServerName { name: String },
    #[error("{0}")]
    Other(net::TlsError),
}

impl TlsError {
    /// `error` with the option that gave the file: `ca_option` for the CA file
    /// (`cacert`, or `tls` for the system's bundle).
    fn named(error: net::TlsError, ca_option: &'static str) -> TlsError {
        let option = |role| match role {
            PemRole::Certificates => "cert",
            PemRole::PrivateKey => "key",
            PemRole::CaCertificates => ca_option,
        };
        match error {
            net::TlsError::File { role, path, reason } => TlsError::File {
                option: option(role),
                path,
                reason,
            },
            net::TlsError::NoCertificate { role, path } => TlsError::File {
                option: option(role),
                path,
                reason: "no certificate in the file".into(),
            },
            net::TlsError::ClientCertificate { source, .. } => TlsError::ClientCert(*source),
            net::TlsError::Versions(source) => TlsError::Protocols(*source),
            net::TlsError::ServerName { name, .. } => TlsError::ServerName { name },
            other => TlsError::Other(other),
        }
    }
}

/// The CA file that verifies the server: `--cacert`, else the system's bundle (with
/// the option to name in its errors).
fn ca_file(options: &TlsOptions) -> Result<(PathBuf, &'static str), TlsError> {
    if let Some(path) = &options.cacert {
        return Ok((path.clone(), "cacert"));
    }
    let system = std::env::var_os("SSL_CERT_FILE")
        .map_or_else(|| PathBuf::from(SYSTEM_CA_BUNDLE), PathBuf::from);
    if !system.exists() {
        return Err(TlsError::NoSystemCa);
    }
    Ok((system, "tls"))
}

/// The client configuration for `options`: reads the CA, certificate and key files.
pub fn client_config(options: &TlsOptions) -> Result<Arc<ClientConfig>, TlsError> {
    let (ca, ca_option) = match options.skip_verify {
        true => (None, "cacert"),
        false => {
            let (path, option) = ca_file(options)?;
            (Some(path), option)
        }
    };
    let spec = ServerTlsSpec {
        ca,
        sni: options.sni.clone(),
        skip_verify: options.skip_verify,
        cert: options.client_cert.as_ref().map(|(cert, _)| cert.clone()),
        key: options.client_cert.as_ref().map(|(_, key)| key.clone()),
        protocols: options.protocols,
    };
    net::client_config(&spec).map_err(|e| TlsError::named(e, ca_option))
}

/// The name the client asks for (SNI) and verifies: `--sni`, else the `--server` host.
/// An IP address is verified against the certificate's IP addresses and sends no SNI.
pub fn server_name(options: &TlsOptions, server: &str) -> Result<ServerName<'static>, TlsError> {
    net::server_name(options.sni.as_deref(), server).map_err(|e| TlsError::named(e, "cacert"))
}

/// A one-line explanation of a failed handshake, naming what to check.
pub fn explain(error: &rustls::Error) -> String {
    use rustls::{AlertDescription, CertificateError};
    let hint = match error {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the server's certificate is not signed by the CA given (--cacert), or --tls-skip-verify to accept any"
        }
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName)
        | rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => {
            "the server's certificate does not name the server: give the name it holds with --sni"
        }
        rustls::Error::InvalidCertificate(_) => "the server's certificate was refused",
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired)
        | rustls::Error::AlertReceived(AlertDescription::HandshakeFailure)
        | rustls::Error::AlertReceived(AlertDescription::UnknownCA)
        | rustls::Error::AlertReceived(AlertDescription::BadCertificate) => {
            "the server refused us: does it require a client certificate (--cert, --key) signed by a CA it trusts?"
        }
        rustls::Error::AlertReceived(AlertDescription::ProtocolVersion) => {
            "no TLS version in common (--tls-protocols)"
        }
        rustls::Error::InvalidMessage(_) => "is the server speaking TLS on this port?",
        _ => "",
    };
    if hint.is_empty() {
        error.to_string()
    } else {
        format!("{error}: {hint}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> TlsOptions {
        TlsOptions {
            client_cert: None,
            cacert: None,
            skip_verify: true,
            sni: None,
            protocols: Protocols::default(),
        }
    }

    #[test]
    fn the_server_name_is_sni_else_the_server_host() {
        let o = options();
        assert_eq!(
            server_name(&o, "[::1]").unwrap(),
            ServerName::IpAddress(std::net::Ipv6Addr::LOCALHOST.into())
        );
        let sni = TlsOptions {
            sni: Some("cache.example".into()),
            ..o.clone()
        };
        assert_eq!(
            server_name(&sni, "127.0.0.1").unwrap(),
            ServerName::try_from("cache.example").unwrap()
        );
        let bad = TlsOptions {
            sni: Some("not a name".into()),
            ..o
        };
        assert!(server_name(&bad, "x")
            .unwrap_err()
            .to_string()
            .starts_with("--sni"));
    }

    #[test]
    fn a_missing_ca_file_is_named_in_the_error() {
        let o = TlsOptions {
            skip_verify: false,
            cacert: Some("/nonexistent/cachelab-ca.pem".into()),
            ..options()
        };
        let e = client_config(&o).unwrap_err().to_string();
        assert!(
            e.starts_with("--cacert /nonexistent/cachelab-ca.pem: "),
            "{e}"
        );
    }

    #[test]
    fn a_file_without_certificates_is_refused_by_name() {
        let dir = tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let o = TlsOptions {
            skip_verify: false,
            cacert: Some(empty.clone()),
            ..options()
        };
        assert_eq!(
            client_config(&o).unwrap_err().to_string(),
            format!("--cacert {}: no certificate in the file", empty.display())
        );
        let o = TlsOptions {
            client_cert: Some((empty.clone(), empty.clone())),
            ..options()
        };
        let e = client_config(&o).unwrap_err().to_string();
        assert!(e.starts_with("--cert "), "{e}");
    }

    #[test]
    fn skip_verify_needs_no_ca_file() {
        // (The versions offered are held by tests/tls.rs against a real server.)
        let o = TlsOptions {
            protocols: Protocols::parse("TLSv1.2").unwrap(),
            ..options()
        };
        assert!(client_config(&o).is_ok());
    }

    #[test]
    fn an_unknown_issuer_names_the_options_to_check() {
        let e = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let text = explain(&e);
        assert!(
            text.contains("--cacert") && text.contains("--tls-skip-verify"),
            "{text}"
        );
        assert!(!text.contains('\n'));
    }
}
