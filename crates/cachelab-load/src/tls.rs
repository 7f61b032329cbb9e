//! TLS towards the server, memtier_benchmark's `--tls` options: which versions
//! (`--tls-protocols`), which CA verifies the server (`--cacert`, or the system's bundle,
//! or none with `--tls-skip-verify`), the client's certificate (`--cert`, `--key`) and the
//! name asked for (`--sni`). Builds a rustls client configuration with the ring provider;
//! no I/O apart from reading the files named. The runner drives the connection itself,
//! so that TLS fits its non-blocking loop.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use thiserror::Error;

/// Where the system's CA bundle is on Debian and its derivatives (OpenSSL's default,
/// which memtier uses when `--cacert` is not given); `SSL_CERT_FILE` overrides it.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The TLS versions offered (`--tls-protocols`). rustls speaks 1.2 and 1.3 only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocols {
    pub tls12: bool,
    pub tls13: bool,
}

impl Default for Protocols {
    fn default() -> Protocols {
        Protocols {
            tls12: true,
            tls13: true,
        }
    }
}

impl Protocols {
    /// memtier's spelling, e.g. `TLSv1.2,TLSv1.3`.
    pub fn names(self) -> String {
        let mut names = Vec::new();
        if self.tls12 {
            names.push("TLSv1.2");
        }
        if self.tls13 {
            names.push("TLSv1.3");
        }
        names.join(",")
    }
}

/// `--tls-protocols`: memtier's comma-separated list (`TLSv1.2,TLSv1.3`).
pub fn parse_protocols(text: &str) -> Result<Protocols, String> {
    let mut p = Protocols {
        tls12: false,
        tls13: false,
    };
    for name in text.split(',').map(str::trim) {
        match name {
            "TLSv1.2" => p.tls12 = true,
            "TLSv1.3" => p.tls13 = true,
            "TLSv1" | "TLSv1.0" | "TLSv1.1" => {
                return Err(format!(
                    "{name} is not offered: it is deprecated (RFC 8996) and rustls speaks TLSv1.2 and TLSv1.3 only"
                ))
            }
            other => {
                return Err(format!(
                    "{other:?} is not one of TLSv1.2, TLSv1.3 (comma-separated)"
                ))
            }
        }
    }
    Ok(p)
}

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

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("--{option} {}: {source}", path.display())]
    Read {
        option: &'static str,
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("--{option} {}: no certificate in the file", path.display())]
    NoCertificate { option: &'static str, path: PathBuf },
    #[error("--cacert {}: {reason}", path.display())]
    BadCa { path: PathBuf, reason: String },
    #[error("--tls: no CA to verify the server with ({SYSTEM_CA_BUNDLE} is missing): give --cacert FILE, or --tls-skip-verify")]
    NoSystemCa,
    #[error("--cert/--key: {0}")]
    ClientCert(rustls::Error),
    #[error("--tls-protocols: {0}")]
    Protocols(rustls::Error),
    #[error("--sni {name:?}: not a DNS name or IP address")]
    ServerName { name: String },
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certificates(
    option: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read = |source| TlsError::Read {
        option,
        path: path.to_owned(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            option,
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

fn roots(cacert: Option<&Path>) -> Result<RootCertStore, TlsError> {
    let system;
    let (option, path) = match cacert {
        Some(path) => ("cacert", path),
        None => {
            system = std::env::var_os("SSL_CERT_FILE")
                .map_or_else(|| PathBuf::from(SYSTEM_CA_BUNDLE), PathBuf::from);
            if !system.exists() {
                return Err(TlsError::NoSystemCa);
            }
            ("tls", system.as_path())
        }
    };
    let mut store = RootCertStore::empty();
    let certs = certificates(option, path)?;
    let (added, _ignored) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsError::BadCa {
            path: path.to_owned(),
            reason: "no usable CA certificate in the file".into(),
        });
    }
    Ok(store)
}

/// The client configuration for `options`: reads the CA, certificate and key files.
pub fn client_config(options: &TlsOptions) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider();
    let mut versions = Vec::new();
    if options.protocols.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if options.protocols.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(TlsError::Protocols)?;
    let builder = if options.skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipVerify(provider)))
    } else {
        builder.with_root_certificates(roots(options.cacert.as_deref())?)
    };
    let config = match &options.client_cert {
        Some((cert, key)) => {
            let chain = certificates("cert", cert)?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Read {
                option: "key",
                path: key.clone(),
                source,
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(TlsError::ClientCert)?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The name the client asks for (SNI) and verifies: `--sni`, else the `--server` host.
/// An IP address is verified against the certificate's IP addresses and sends no SNI.
pub fn server_name(options: &TlsOptions, server: &str) -> Result<ServerName<'static>, TlsError> {
    let name = options.sni.as_deref().unwrap_or(server);
    let name = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    ServerName::try_from(name.to_owned()).map_err(|_| TlsError::ServerName { name: name.into() })
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

/// `--tls-skip-verify`: any certificate is accepted, but the handshake's signatures are
/// checked with the key it holds (so the session is still the certificate holder's).
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
        verify_tls12_signature(
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
        verify_tls13_signature(
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
    fn protocols_are_memtiers_comma_separated_names() {
        assert_eq!(
            parse_protocols("TLSv1.2").unwrap(),
            Protocols {
                tls12: true,
                tls13: false
            }
        );
        assert_eq!(
            parse_protocols("TLSv1.3, TLSv1.2").unwrap(),
            Protocols::default()
        );
        assert_eq!(Protocols::default().names(), "TLSv1.2,TLSv1.3");
    }

    #[test]
    fn old_protocols_are_refused_with_the_reason() {
        let e = parse_protocols("TLSv1.1,TLSv1.2").unwrap_err();
        assert!(e.starts_with("TLSv1.1 is not offered"), "{e}");
        assert!(parse_protocols("SSLv3").unwrap_err().contains("not one of"));
    }

    #[test]
    fn the_server_name_is_sni_else_the_server_host() {
        let o = options();
        assert_eq!(
            server_name(&o, "127.0.0.1").unwrap(),
            ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into())
        );
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
        let e = client_config(&o).unwrap_err();
        assert!(
            matches!(
                e,
                TlsError::NoCertificate {
                    option: "cacert",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn skip_verify_needs_no_ca_file() {
        // (The versions offered are held by tests/tls.rs against a real server.)
        let o = TlsOptions {
            protocols: parse_protocols("TLSv1.2").unwrap(),
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
