"""The throw-away CA and its certificates: a client that trusts only that CA completes a
handshake with each certificate under the name it carries and refuses another name or
another CA; the keys are private; the directory is gone after the experiment, also when it
fails."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509

from cachelab.hosts import tls


def serve_once(pair: tls.Pair) -> tuple[int, threading.Thread]:
    """A one-connection TLS server on a free loopback port with `pair`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.chain, pair.key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        with listener:
            listener.settimeout(10)
            conn, _ = listener.accept()
            try:
                with context.wrap_socket(conn, server_side=True) as tls_conn:
                    tls_conn.recv(1)
            except (ssl.SSLError, OSError):
                pass  # the client refused us: what some tests expect

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    return port, thread


@pytest.mark.parametrize(("role", "name"), [("server", tls.SERVER_NAME),
                                            ("middleware", tls.MIDDLEWARE_NAME),
                                            ("server", "127.0.0.1")])
def test_a_client_trusting_the_ca_verifies_each_certificate_by_its_name(tmp_path, role, name):
    files = tls.make(tmp_path)
    port, thread = serve_once(getattr(files, role))
    found = tls.probe("127.0.0.1", port, files.ca, name)
    thread.join(10)
    assert found.version in ("TLSv1.2", "TLSv1.3") and found.cipher


def test_another_name_is_refused(tmp_path):
    files = tls.make(tmp_path)
    port, thread = serve_once(files.server)
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        tls.probe("127.0.0.1", port, files.ca, tls.MIDDLEWARE_NAME)
    thread.join(10)


def test_another_experiments_ca_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    mine, other = tls.make(tmp_path / "a"), tls.make(tmp_path / "b")
    port, thread = serve_once(mine.server)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        tls.probe("127.0.0.1", port, other.ca, tls.SERVER_NAME)
    thread.join(10)


def test_the_certificates_say_what_they_are(tmp_path):
    files = tls.make(tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    chain = x509.load_pem_x509_certificates(files.server.chain.read_bytes())
    assert len(chain) == 2 and chain[1] == ca  # leaf first, then the CA
    leaf = chain[0]
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [tls.SERVER_NAME]
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    now = time.time()
    assert leaf.not_valid_before_utc.timestamp() < now < leaf.not_valid_after_utc.timestamp()


def test_the_keys_are_readable_by_their_owner_only(tmp_path):
    files = tls.make(tmp_path)
    for key in (files.server.key, files.middleware.key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert not list(tmp_path.glob("ca*.key"))  # the CA's key is never written


def test_the_directory_is_removed_when_the_experiment_ends(tmp_path):
    with tls.throwaway(tmp_path) as files:
        assert files.directory.name.startswith("cachelab-tls-")
        assert files.server.key.is_file()
    assert not files.directory.exists() and list(tmp_path.iterdir()) == []


def test_the_directory_is_removed_when_the_experiment_fails(tmp_path):
    held: list[Path] = []
    with pytest.raises(KeyboardInterrupt), tls.throwaway(tmp_path) as files:
        held.append(files.directory)
        raise KeyboardInterrupt
    assert held and not held[0].exists() and list(tmp_path.iterdir()) == []
