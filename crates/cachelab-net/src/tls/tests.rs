//! The configurations built here, proved by handshakes in memory (rustls's sessions
//! with the records passed between them by hand) against the testkit's CA.

use std::path::Path;

use cachelab_testkit::pki::Pki;
use rustls::{ClientConnection, Connection, ServerConnection};

use super::*;

fn listener(pki: &Pki, client_ca: bool, protocols: Protocols) -> ListenerTlsSpec {
    let issued = pki.issue("server", false);
    ListenerTlsSpec {
        cert: issued.cert,
        key: issued.key,
        client_ca: client_ca.then(|| pki.ca.clone()),
        protocols,
    }
}

fn verified_by(ca: &Path) -> ServerTlsSpec {
    ServerTlsSpec {
        ca: Some(ca.to_path_buf()),
        ..ServerTlsSpec::default()
    }
}

/// Moves the records `from` has to send into `to`: true if there were any.
fn pass(from: &mut Connection, to: &mut Connection) -> Result<bool, rustls::Error> {
    let mut records = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut records).unwrap();
    }
    let mut rest = &records[..];
    while !rest.is_empty() {
        to.read_tls(&mut rest).unwrap();
        to.process_new_packets()?;
    }
    Ok(!records.is_empty())
}

/// Handshakes in memory until neither side has records to send; the client's session.
fn handshake(client: ServerTls, server: &ListenerTlsSpec) -> Result<Connection, rustls::Error> {
    let mut client: Connection = ClientConnection::new(client.config, client.name)?.into();
    let mut server: Connection = ServerConnection::new(server_config(server).unwrap())?.into();
    while pass(&mut client, &mut server)? | pass(&mut server, &mut client)? {}
    assert!(!client.is_handshaking() && !server.is_handshaking());
    Ok(client)
}

#[test]
fn a_client_verifies_a_listener_by_the_ca_and_its_address() {
    let pki = Pki::new("cachelab-net test CA");
    let tls = ServerTls::build(&verified_by(&pki.ca), "127.0.0.1").unwrap();
    assert!(matches!(tls.name, ServerName::IpAddress(_)));
    handshake(tls, &listener(&pki, false, Protocols::default())).unwrap();
    let by_name = ServerTls::build(&verified_by(&pki.ca), "localhost").unwrap();
    handshake(by_name, &listener(&pki, false, Protocols::default())).unwrap();
}

#[test]
fn another_ca_or_another_name_is_refused() {
    let pki = Pki::new("cachelab-net test CA");
    let other = Pki::new("another CA");
    let tls = ServerTls::build(&verified_by(&other.ca), "127.0.0.1").unwrap();
    let e = handshake(tls, &listener(&pki, false, Protocols::default())).unwrap_err();
    assert!(
        matches!(
            e,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)
        ),
        "{e}"
    );
    let spec = ServerTlsSpec {
        sni: Some("cache.example".into()),
        ..verified_by(&pki.ca)
    };
    let tls = ServerTls::build(&spec, "127.0.0.1").unwrap();
    let e = handshake(tls, &listener(&pki, false, Protocols::default())).unwrap_err();
    assert!(matches!(e, rustls::Error::InvalidCertificate(_)), "{e}");
}

#[test]
fn skip_verify_needs_no_ca_and_accepts_any_certificate() {
    let err = ServerTls::build(&ServerTlsSpec::default(), "localhost").unwrap_err();
    assert!(err.to_string().contains("CA file"), "{err}");
    let pki = Pki::new("cachelab-net test CA");
    let own = pki.self_signed("server");
    let spec = ListenerTlsSpec {
        cert: own.cert,
        key: own.key,
        client_ca: None,
        protocols: Protocols::default(),
    };
    let skip = ServerTlsSpec {
        skip_verify: true,
        ..ServerTlsSpec::default()
    };
    handshake(ServerTls::build(&skip, "127.0.0.1").unwrap(), &spec).unwrap();
}

#[test]
fn mutual_tls_wants_a_client_certificate_from_the_ca() {
    let pki = Pki::new("cachelab-net test CA");
    let server = listener(&pki, true, Protocols::default());
    let client = pki.issue("client", true);
    let with_cert = ServerTlsSpec {
        cert: Some(client.cert.clone()),
        key: Some(client.key.clone()),
        ..verified_by(&pki.ca)
    };
    handshake(ServerTls::build(&with_cert, "127.0.0.1").unwrap(), &server).unwrap();
    // TLS 1.2: the server refuses inside the handshake (1.3 learns it after).
    let tls12 = Protocols::parse("1.2").unwrap();
    let without = ServerTlsSpec {
        protocols: tls12,
        ..verified_by(&pki.ca)
    };
    let server12 = listener(&pki, true, tls12);
    let tls = ServerTls::build(&without, "127.0.0.1").unwrap();
    assert!(handshake(tls, &server12).is_err());
    let half = ServerTlsSpec {
        cert: Some(client.cert),
        ..verified_by(&pki.ca)
    };
    assert!(matches!(
        client_config(&half),
        Err(TlsError::HalfClientCertificate)
    ));
}

#[test]
fn the_versions_offered_are_the_versions_spoken() {
    let pki = Pki::new("cachelab-net test CA");
    let server = listener(&pki, false, Protocols::default());
    for (text, version) in [
        ("TLSv1.2", rustls::ProtocolVersion::TLSv1_2),
        ("1.3", rustls::ProtocolVersion::TLSv1_3),
    ] {
        let spec = ServerTlsSpec {
            protocols: Protocols::parse(text).unwrap(),
            ..verified_by(&pki.ca)
        };
        let client = handshake(ServerTls::build(&spec, "localhost").unwrap(), &server).unwrap();
        assert_eq!(client.protocol_version(), Some(version));
    }
    let only13 = listener(&pki, false, Protocols::parse("1.3").unwrap());
    let spec = ServerTlsSpec {
        protocols: Protocols::parse("1.2").unwrap(),
        ..verified_by(&pki.ca)
    };
    assert!(handshake(ServerTls::build(&spec, "localhost").unwrap(), &only13).is_err());
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
    assert!(
        err.starts_with("cannot read certificates /nonexistent/cachelab.pem: "),
        "{err}"
    );
}

#[test]
fn the_server_name_is_sni_else_the_host_without_brackets() {
    assert_eq!(
        server_name(None, "127.0.0.1").unwrap(),
        ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into())
    );
    assert_eq!(
        server_name(None, "[::1]").unwrap(),
        ServerName::IpAddress(std::net::Ipv6Addr::LOCALHOST.into())
    );
    assert_eq!(
        server_name(Some("cache.example"), "127.0.0.1").unwrap(),
        ServerName::try_from("cache.example").unwrap()
    );
    let err = server_name(Some("not a name"), "x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "TLS SNI: \"not a name\" is not a valid DNS name or IP address"
    );
}

#[test]
fn an_error_is_small_enough_to_return() {
    assert!(std::mem::size_of::<TlsError>() <= 64);
}
