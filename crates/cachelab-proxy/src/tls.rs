//! TLS settings and the rustls configurations built from them: a listener's (its
//! certificate chain and key, optionally a CA that client certificates must chain to)
//! and a pool's towards its servers (a CA or skip-verify, the name sent as SNI and
//! verified, optionally a client certificate).
//!
//! Files are read when a configuration is built: at start and on every reload
//! ([`ListenerTls::reload`], and a reload rebuilds every pool's server side), so a
//! rotated certificate is served to the connections that come after it.
//!
//! The crypto provider is *ring*: it builds with the C compiler alone (aws-lc-rs needs
//! cmake and takes several times as long), and no OpenSSL is involved.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use thiserror::Error;

/// Why a TLS configuration could not be built: the file and the reason.
#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read {kind} {path}: {reason}")]
    File {
        kind: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("{path}: no certificate in the file")]
    NoCertificate { path: PathBuf },
    #[error("{0}")]
    Rustls(String),
    #[error("unknown TLS protocol {0:?}: expected 1.2 or 1.3 (TLSv1.2, TLSv1.3)")]
    Protocol(String),
    #[error("TLS {what}: {name:?} is not a valid DNS name or IP address")]
    ServerName { what: &'static str, name: String },
}

/// TLS protocol versions allowed, memtier's `--tls-protocols` spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protocols {
    pub tls12: bool,
    pub tls13: bool,
}

impl Default for Protocols {
    fn default() -> Self {
        Protocols {
            tls12: true,
            tls13: true,
        }
    }
}

impl Protocols {
    /// `"1.2,1.3"`, `"TLSv1.3"`, ... (comma or space separated, case-insensitive).
    pub fn parse(text: &str) -> Result<Protocols, TlsError> {
        let mut out = Protocols {
            tls12: false,
            tls13: false,
        };
        for item in text.split([',', ' ']).filter(|s| !s.is_empty()) {
            match item.to_ascii_lowercase().trim_start_matches("tlsv") {
                "1.2" => out.tls12 = true,
                "1.3" => out.tls13 = true,
                _ => return Err(TlsError::Protocol(item.to_string())),
            }
        }
        if !out.tls12 && !out.tls13 {
            return Err(TlsError::Protocol(text.to_string()));
        }
        Ok(out)
    }

    fn versions(self) -> Vec<&'static rustls::SupportedProtocolVersion> {
        let mut v = Vec::new();
        if self.tls13 {
            v.push(&rustls::version::TLS13);
        }
        if self.tls12 {
            v.push(&rustls::version::TLS12);
        }
        v
    }
}

/// A listener's TLS: what it serves, and whom it lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerTlsSpec {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// Mutual TLS: clients must present a certificate that chains to a CA in this PEM
    /// file; without it, clients are not asked for one.
    pub client_ca: Option<PathBuf>,
    pub protocols: Protocols,
}

/// A pool's TLS towards its servers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ServerTlsSpec {
    /// PEM CAs the servers' certificates must chain to (required unless `skip_verify`).
    pub ca: Option<PathBuf>,
    /// The name sent as SNI and matched against the server's certificate; by default
    /// the host as written in the server's address.
    pub sni: Option<String>,
    /// Accept any server certificate (encryption without authentication).
    pub skip_verify: bool,
    /// A client certificate chain and its key, for servers that require one.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub protocols: Protocols,
}

/// What a connection to one server needs for its handshake.
#[derive(Debug)]
pub struct ServerTls {
    pub config: Arc<ClientConfig>,
    pub name: ServerName<'static>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn rustls_error(e: rustls::Error) -> TlsError {
    TlsError::Rustls(e.to_string())
}

pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let file_error = |reason: String| TlsError::File {
        kind: "certificates",
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(pem_reason(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(pem_reason(&e)))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::File {
        kind: "private key",
        path: path.to_path_buf(),
        reason: pem_reason(&e),
    })
}

/// Why a PEM file could not be read, in words. The parser's own text shows bytes as a
/// list of decimal numbers (the expected END line, or the file's offending line, which
/// for a key file could be secret): a truncated file is named as such, and a bad line
/// is not quoted.
fn pem_reason(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "truncated: no -----END {}----- line",
            String::from_utf8_lossy(end_marker).trim()
        ),
        pem::Error::IllegalSectionStart { .. } => "a malformed -----BEGIN line".to_string(),
        other => other.to_string(),
    }
}

fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots.add(cert).map_err(|e| TlsError::File {
            kind: "CA certificates",
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// Reads a listener's files and builds its rustls configuration.
pub fn server_config(spec: &ListenerTlsSpec) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&spec.protocols.versions())
        .map_err(rustls_error)?;
    let builder = match &spec.client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(load_roots(ca)?), provider())
                    .build()
                    .map_err(|e| TlsError::Rustls(format!("client CA {}: {e}", ca.display())))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(load_certs(&spec.cert)?, load_key(&spec.key)?)
        .map_err(|e| {
            TlsError::Rustls(format!(
                "{} with {}: {e}",
                spec.cert.display(),
                spec.key.display()
            ))
        })?;
    Ok(Arc::new(config))
}

/// Reads a pool's server-side files and builds what its connections handshake with.
/// `host` is the server's host as written (the default SNI name).
pub fn client_config(spec: &ServerTlsSpec, host: &str) -> Result<ServerTls, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&spec.protocols.versions())
        .map_err(rustls_error)?;
    let builder = if spec.skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipVerify(provider())))
    } else {
        let roots = match &spec.ca {
            Some(ca) => load_roots(ca)?,
            None => {
                return Err(TlsError::Rustls(
                    "server TLS needs a CA file (or skip-verify)".into(),
                ))
            }
        };
        builder.with_root_certificates(roots)
    };
    let config = match (&spec.cert, &spec.key) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|e| TlsError::Rustls(format!("client certificate {}: {e}", cert.display())))?,
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(TlsError::Rustls(
                "a client certificate needs both its chain and its key".into(),
            ))
        }
    };
    let (what, name) = match &spec.sni {
        Some(sni) => ("SNI", sni.as_str()),
        None => ("server host", host),
    };
    let name = ServerName::try_from(name.to_string()).map_err(|_| TlsError::ServerName {
        what,
        name: name.to_string(),
    })?;
    Ok(ServerTls {
        config: Arc::new(config),
        name,
    })
}

/// A listener's TLS configuration, replaced whole by a reload: handshakes started after
/// it use the new certificate, connections already up keep theirs.
pub struct ListenerTls {
    spec: RwLock<ListenerTlsSpec>,
    config: RwLock<Arc<ServerConfig>>,
}

impl ListenerTls {
    pub fn new(spec: ListenerTlsSpec) -> Result<Self, TlsError> {
        let config = server_config(&spec)?;
        Ok(ListenerTls {
            spec: RwLock::new(spec),
            config: RwLock::new(config),
        })
    }

    pub fn current(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Rereads the files (of `spec` if given, a reloaded configuration's, else the
    /// current ones); on an error the old configuration stays.
    pub fn reload(&self, spec: Option<&ListenerTlsSpec>) -> Result<(), TlsError> {
        let spec = match spec {
            Some(spec) => spec.clone(),
            None => self.spec.read().unwrap_or_else(|p| p.into_inner()).clone(),
        };
        let config = server_config(&spec)?;
        *self.config.write().unwrap_or_else(|p| p.into_inner()) = config;
        *self.spec.write().unwrap_or_else(|p| p.into_inner()) = spec;
        Ok(())
    }
}

/// `skip_verify`: any certificate is accepted, but the handshake's signatures are still
/// checked (so the session is at least bound to the key the server presented).
#[derive(Debug)]
struct SkipVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for SkipVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_read_memtiers_spelling_and_ours() {
        assert_eq!(
            Protocols::parse("TLSv1.2").unwrap(),
            Protocols {
                tls12: true,
                tls13: false
            }
        );
        assert_eq!(
            Protocols::parse("1.3").unwrap(),
            Protocols {
                tls12: false,
                tls13: true
            }
        );
        assert_eq!(
            Protocols::parse("tlsv1.2, 1.3").unwrap(),
            Protocols::default()
        );
        assert!(Protocols::parse("1.1").is_err());
        assert!(Protocols::parse("").is_err());
    }

    #[test]
    fn a_missing_certificate_file_names_the_file() {
        let spec = ListenerTlsSpec {
            cert: "/nonexistent/cachelab.pem".into(),
            key: "/nonexistent/cachelab.key".into(),
            client_ca: None,
            protocols: Protocols::default(),
        };
        let err = server_config(&spec).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/cachelab.pem"), "{err}");
    }

    #[test]
    fn a_truncated_pem_is_named_in_words_not_bytes() {
        let dir = tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap();
        let path = dir.path().join("cut.pem");
        std::fs::write(&path, "-----BEGIN CERTIFICATE-----\nMIIB\n").unwrap();
        let err = load_certs(&path).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "cannot read certificates {}: truncated: no -----END CERTIFICATE----- line",
                path.display()
            )
        );
        std::fs::write(&path, "-----BEGIN PRIVATE KEY-----\nMIIB\n").unwrap();
        let err = load_key(&path).unwrap_err().to_string();
        assert!(
            err.ends_with("truncated: no -----END PRIVATE KEY----- line"),
            "{err}"
        );
        std::fs::write(&path, "-----BEGIN s3cret\n").unwrap();
        let err = load_key(&path).unwrap_err().to_string();
        assert!(!err.contains("s3cret") && !err.contains("115"), "{err}");
    }

    #[test]
    fn server_tls_needs_a_ca_unless_verification_is_skipped() {
        let err = client_config(&ServerTlsSpec::default(), "localhost").unwrap_err();
        assert!(err.to_string().contains("CA file"), "{err}");
        let skip = ServerTlsSpec {
            skip_verify: true,
            ..ServerTlsSpec::default()
        };
        let tls = client_config(&skip, "127.0.0.1").unwrap();
        assert!(matches!(tls.name, ServerName::IpAddress(_)));
    }
}
