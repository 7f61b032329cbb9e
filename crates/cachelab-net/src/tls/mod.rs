//! TLS settings and the rustls configurations built from them: a listener's (its
//! certificate chain and key, optionally a CA that client certificates must chain to)
//! and a client's towards a server (a CA or skip-verify, the name sent as SNI and
//! verified, optionally a client certificate). The middleware builds both, the load
//! generator the client's.
//!
//! Files are read when a configuration is built, and only then: a caller that rebuilds
//! (the middleware's reload) serves a rotated certificate to the connections after it.
//!
//! The crypto provider is *ring*: it builds with the C compiler alone (aws-lc-rs needs
//! cmake and takes several times as long), and no OpenSSL is involved.

mod pem;
mod protocols;
mod skip_verify;

use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{VerifierBuilderError, WebPkiClientVerifier};
use rustls::{ClientConfig, ServerConfig};
use rustls_pki_types::ServerName;
use thiserror::Error;

pub use pem::{load_certs, load_key, load_roots, PemRole};
pub use protocols::{Protocols, ProtocolsError};
use skip_verify::SkipVerify;

/// Why a TLS configuration could not be built: the file or setting, and the reason.
/// (rustls's errors are boxed: they would make every `Result` that carries this one
/// several times larger.)
#[derive(Debug, Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("cannot read {role} {}: {reason}", path.display())]
    File {
        role: PemRole,
        path: PathBuf,
        reason: String,
    },
    #[error("{}: no certificate in the file", path.display())]
    NoCertificate { role: PemRole, path: PathBuf },
    /// Verifying a server needs a CA unless verification is skipped.
    #[error("server TLS needs a CA file (or skip-verify)")]
    NoCa,
    #[error("a client certificate needs both its chain and its key")]
    HalfClientCertificate,
    /// rustls refused a client certificate chain with its key.
    #[error("client certificate {}: {source}", cert.display())]
    ClientCertificate {
        cert: PathBuf,
        source: Box<rustls::Error>,
    },
    /// rustls refused a listener's certificate chain with its key.
    #[error("{} with {}: {source}", cert.display(), key.display())]
    Certificate {
        cert: PathBuf,
        key: PathBuf,
        source: Box<rustls::Error>,
    },
    #[error("client CA {}: {source}", path.display())]
    ClientCa {
        path: PathBuf,
        source: Box<VerifierBuilderError>,
    },
    /// The provider has no cipher suite for the versions asked for.
    #[error("{0}")]
    Versions(Box<rustls::Error>),
    #[error(transparent)]
    Protocols(#[from] ProtocolsError),
    #[error("TLS {what}: {name:?} is not a valid DNS name or IP address")]
    ServerName { what: &'static str, name: String },
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

/// A client's TLS towards a server (the middleware's towards a pool's servers, the load
/// generator's towards its target).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ServerTlsSpec {
    /// PEM CAs the server's certificate must chain to (required unless `skip_verify`).
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
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub config: Arc<ClientConfig>,
    pub name: ServerName<'static>,
}

impl ServerTls {
    /// Reads `spec`'s files and names the server: `host` is its host as written (the
    /// default SNI name).
    pub fn build(spec: &ServerTlsSpec, host: &str) -> Result<ServerTls, TlsError> {
        Ok(ServerTls {
            config: client_config(spec)?,
            name: server_name(spec.sni.as_deref(), host)?,
        })
    }
}

/// The crypto provider of every configuration built here.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads a listener's files and builds its rustls configuration.
pub fn server_config(spec: &ListenerTlsSpec) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&spec.protocols.versions())
        .map_err(|e| TlsError::Versions(Box::new(e)))?;
    let builder = match &spec.client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(load_roots(ca)?), provider())
                    .build()
                    .map_err(|source| TlsError::ClientCa {
                        path: ca.clone(),
                        source: Box::new(source),
                    })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = builder
        .with_single_cert(load_certs(&spec.cert)?, load_key(&spec.key)?)
        .map_err(|source| TlsError::Certificate {
            cert: spec.cert.clone(),
            key: spec.key.clone(),
            source: Box::new(source),
        })?;
    Ok(Arc::new(config))
}

/// Reads a client's files and builds its rustls configuration.
pub fn client_config(spec: &ServerTlsSpec) -> Result<Arc<ClientConfig>, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&spec.protocols.versions())
        .map_err(|e| TlsError::Versions(Box::new(e)))?;
    let builder = if spec.skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipVerify(provider())))
    } else {
        let ca = spec.ca.as_ref().ok_or(TlsError::NoCa)?;
        builder.with_root_certificates(load_roots(ca)?)
    };
    let config = match (&spec.cert, &spec.key) {
        (Some(cert), Some(key)) => builder
            .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
            .map_err(|source| TlsError::ClientCertificate {
                cert: cert.clone(),
                source: Box::new(source),
            })?,
        (None, None) => builder.with_no_client_auth(),
        _ => return Err(TlsError::HalfClientCertificate),
    };
    Ok(Arc::new(config))
}

/// The name a client asks for (SNI) and verifies: `sni` if given, else the server's
/// `host` (an IPv6 address may keep its brackets). An IP address is verified against
/// the certificate's IP addresses and sends no SNI.
pub fn server_name(sni: Option<&str>, host: &str) -> Result<ServerName<'static>, TlsError> {
    let (what, name) = match sni {
        Some(sni) => ("SNI", sni),
        None => ("server host", host),
    };
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    ServerName::try_from(bare.to_string()).map_err(|_| TlsError::ServerName {
        what,
        name: bare.to_string(),
    })
}

#[cfg(test)]
mod tests;
