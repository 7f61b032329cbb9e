"""TLS for an experiment: a throw-away certificate authority and the certificates it signs,
the command-line options that make each process use them, and a probe that asks a server
what it negotiates.

The CA and its certificates are made once per experiment (`throwaway`), in a private
temporary directory named `cachelab-tls-*` that is removed when the experiment ends, on
every exit path; nothing of them is kept (a run stores its processes' command lines, which
name the files, not the keys). Keys are ECDSA P-256, the certificates valid from an hour
ago for a week, so a clock a little behind or a long experiment does not trip them.

Each certificate names a role, not an address: the servers' names `cachelab-server`, the
middlewares' `cachelab-middleware` (both also 127.0.0.1), and every client verifies that
name (`--sni`, `--server-tls-sni`). So one set of certificates serves every host of a
topology whatever addresses its hosts get, and verification is complete: the chain to the
experiment's CA, the validity period and the name.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import socket
import ssl
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: The name in the servers' certificate, sent and verified by their clients.
SERVER_NAME = "cachelab-server"
#: The name in the middlewares' certificate, sent and verified by the load generators.
MIDDLEWARE_NAME = "cachelab-middleware"
#: Where the throw-away directory is made (tests point it elsewhere).
TEMP_PREFIX = "cachelab-tls-"
VALID_FOR = datetime.timedelta(days=7)
BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True)
class Pair:
    """A certificate chain (PEM, leaf first, then the CA) and its private key (PEM)."""

    chain: Path
    key: Path


@dataclass(frozen=True)
class TlsFiles:
    """An experiment's CA certificate and the servers' and middlewares' certificates."""

    directory: Path
    ca: Path
    server: Pair
    middleware: Pair


@contextmanager
def throwaway(parent: Path | None = None) -> Iterator[TlsFiles]:
    """A fresh CA and certificates in a private temporary directory, removed on exit
    (an error, Ctrl-C, or the experiment's end)."""
    directory = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=parent))
    try:
        yield make(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def make(directory: Path) -> TlsFiles:
    """Writes a CA and its two leaf certificates into `directory` (keys mode 0600)."""
    from cryptography import x509  # loaded only by experiments with TLS
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "cachelab"),
                          x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM,
                                 serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem(key))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("cachelab throw-away CA")
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE).not_valid_after(now + VALID_FOR)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(
                   digital_signature=True, key_cert_sign=True, crl_sign=True,
                   content_commitment=False, key_encipherment=False, data_encipherment=False,
                   key_agreement=False, encipher_only=False, decipher_only=False),
                   critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                              critical=False)
               .sign(ca_key, hashes.SHA256()))
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (directory / "ca.pem").write_bytes(ca_pem)

    def leaf(role: str, dns: str) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(dns)).issuer_name(ca_name)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - BACKDATE).not_valid_after(now + VALID_FOR)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                               critical=True)
                .add_extension(x509.SubjectAlternativeName([
                    x509.DNSName(dns), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                    critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        pair = Pair(directory / f"{role}-chain.pem", directory / f"{role}.key")
        pair.chain.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
        write_key(pair.key, key)
        return pair

    return TlsFiles(directory, directory / "ca.pem", leaf("server", SERVER_NAME),
                    leaf("middleware", MIDDLEWARE_NAME))


# -- command lines ----------------------------------------------------------------------

def memcached_args(pair: Pair) -> list[str]:
    """memcached serving TLS on its TCP port (`-Z`), with the chain and key."""
    return ["-Z", "-o", f"ssl_chain_cert={pair.chain},ssl_key={pair.key}"]


def redis_args(files: TlsFiles, port: int) -> list[str]:
    """redis-server serving TLS on `port` and nothing else (`--port 0`); clients are not
    asked for a certificate."""
    return ["--port", "0", "--tls-port", str(port),
            "--tls-cert-file", str(files.server.chain), "--tls-key-file", str(files.server.key),
            "--tls-ca-cert-file", str(files.ca), "--tls-auth-clients", "no"]


def proxy_listener_args(files: TlsFiles) -> list[str]:
    """cachelab-proxy serving TLS to its clients."""
    return ["--tls-cert", str(files.middleware.chain), "--tls-key", str(files.middleware.key)]


def proxy_server_args(files: TlsFiles) -> list[str]:
    """cachelab-proxy speaking TLS to its servers, verifying them against the CA."""
    return ["--server-tls", "--server-tls-ca", str(files.ca), "--server-tls-sni", SERVER_NAME]


# -- what a server negotiates -------------------------------------------------------------

@dataclass(frozen=True)
class Negotiated:
    """What one handshake agreed on, as the client's library names it."""

    version: str
    cipher: str


def probe(address: str, port: int, ca: Path, name: str, timeout: float = 5.0) -> Negotiated:
    """One TLS connection to `address:port` verified against `ca` for `name` (Python's
    `ssl`, TLS 1.2 and 1.3 offered, as the harness's Rust clients offer); what it
    negotiated. Raises OSError (ssl.SSLError included) when it cannot."""
    context = ssl.create_default_context(cafile=str(ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection((address, port), timeout=timeout) as raw, \
            context.wrap_socket(raw, server_hostname=name) as conn:
        cipher = conn.cipher()
        version = conn.version()
        if cipher is None or version is None:
            raise ssl.SSLError(f"no TLS session with {address}:{port}")
        return Negotiated(version, cipher[0])


def main(argv: list[str]) -> int:
    """`python -m cachelab.hosts.tls probe ADDRESS PORT CA NAME`: the probe as a command, for
    hosts whose network the harness is not in (emulated hosts); one JSON line."""
    if len(argv) != 5 or argv[0] != "probe":
        print("usage: python -m cachelab.hosts.tls probe ADDRESS PORT CA NAME", file=sys.stderr)
        return 2
    found = probe(argv[1], int(argv[2]), Path(argv[3]), argv[4])
    print(json.dumps({"version": found.version, "cipher": found.cipher}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
