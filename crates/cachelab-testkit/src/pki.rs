//! A throw-away certificate authority for the TLS tests of both binaries and the TLS cost
//! example: server certificates for 127.0.0.1 and localhost, client certificates, and a
//! self-signed one, written as PEM files into a `cachelab` temporary directory that goes
//! with it (rcgen).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};

/// The address the certificates are issued for (with `localhost`).
pub const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cachelab")
        .tempdir()
        .unwrap()
}

/// A throw-away CA that issues server and client certificates into its directory.
pub struct Pki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
    /// The CA's certificate (PEM).
    pub ca: PathBuf,
}

/// A certificate and its key (PEM files).
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    /// A CA named `name`, in a new `cachelab` temporary directory.
    pub fn new(name: &str) -> Pki {
        let dir = temp_dir();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, cert.pem()).unwrap();
        Pki {
            dir,
            issuer: Issuer::new(params, key),
            ca,
        }
    }

    /// The directory the files are written in (removed with the `Pki`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A server certificate for 127.0.0.1 and localhost, or a client's.
    pub fn issue(&self, name: &str, client: bool) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        if client {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        } else {
            params.subject_alt_names = vec![
                SanType::IpAddress(LOCALHOST),
                SanType::DnsName("localhost".try_into().unwrap()),
            ];
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        }
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        self.write(name, cert.pem(), key.serialize_pem())
    }

    /// A self-signed server certificate (no CA vouches for it).
    pub fn self_signed(&self, name: &str) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.subject_alt_names.push(SanType::IpAddress(LOCALHOST));
        let cert = params.self_signed(&key).unwrap();
        self.write(name, cert.pem(), key.serialize_pem())
    }

    fn write(&self, name: &str, cert: String, key: String) -> Issued {
        let issued = Issued {
            cert: self.dir.path().join(format!("{name}.pem")),
            key: self.dir.path().join(format!("{name}.key")),
        };
        std::fs::write(&issued.cert, cert).unwrap();
        std::fs::write(&issued.key, key).unwrap();
        issued
    }
}
