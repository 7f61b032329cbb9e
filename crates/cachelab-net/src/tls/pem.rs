//! Reading PEM files: certificate chains, private keys and CA certificates. An error
//! names the file, what it was read as ([`PemRole`]) and why, in words.

use std::fmt;
use std::path::Path;

use rustls::RootCertStore;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsError;

/// What a PEM file was read as, for the error that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PemRole {
    /// A certificate chain, leaf first (a listener's, or a client's for mutual TLS).
    Certificates,
    /// The private key of a certificate (PKCS#8, PKCS#1 or SEC1).
    PrivateKey,
    /// The CA certificates a peer's certificate must chain to.
    CaCertificates,
}

impl fmt::Display for PemRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PemRole::Certificates => "certificates",
            PemRole::PrivateKey => "private key",
            PemRole::CaCertificates => "CA certificates",
        })
    }
}

fn file_error(role: PemRole, path: &Path, reason: String) -> TlsError {
    TlsError::File {
        role,
        path: path.to_path_buf(),
        reason,
    }
}

/// Every certificate in a PEM file (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    certs_as(PemRole::Certificates, path)
}

fn certs_as(role: PemRole, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(role, path, pem_reason(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(role, path, pem_reason(&e)))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            role,
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The first private key in a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| file_error(PemRole::PrivateKey, path, pem_reason(&e)))
}

/// The CA certificates in a PEM file. Certificates webpki cannot use as trust anchors
/// are passed over, as OpenSSL does with a system bundle; a file with none it can use
/// is refused.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    let (added, _ignored) =
        roots.add_parsable_certificates(certs_as(PemRole::CaCertificates, path)?);
    if added == 0 {
        return Err(file_error(
            PemRole::CaCertificates,
            path,
            "no usable CA certificate in the file".into(),
        ));
    }
    Ok(roots)
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

#[cfg(test)]
mod tests {
    use cachelab_testkit::pki::Pki;

    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap()
    }

    #[test]
    fn a_truncated_pem_is_named_in_words_not_bytes() {
        let dir = dir();
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
    fn a_missing_file_is_named_with_its_role() {
        let err = load_roots(Path::new("/nonexistent/ca.pem")).unwrap_err();
        assert!(
            matches!(
                &err,
                TlsError::File {
                    role: PemRole::CaCertificates,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("cannot read CA certificates /nonexistent/ca.pem: "),
            "{err}"
        );
    }

    #[test]
    fn a_file_without_certificates_is_refused_by_name() {
        let dir = dir();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = load_roots(&path).unwrap_err();
        assert!(
            matches!(
                err,
                TlsError::NoCertificate {
                    role: PemRole::CaCertificates,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            format!("{}: no certificate in the file", path.display())
        );
    }

    #[test]
    fn the_testkits_files_are_read() {
        let pki = Pki::new("cachelab-net test CA");
        let issued = pki.issue("server", false);
        assert_eq!(load_certs(&issued.cert).unwrap().len(), 1);
        assert!(load_key(&issued.key).is_ok());
        assert_eq!(load_roots(&pki.ca).unwrap().len(), 1);
        let err = load_key(&issued.cert).unwrap_err().to_string();
        assert!(err.starts_with("cannot read private key "), "{err}");
    }
}
