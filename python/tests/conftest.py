"""Shared fixtures: real servers on loopback, started and stopped by the tests."""

from __future__ import annotations

import pytest

from cachelab.errors import UserError
from cachelab.hosts.binaries import find_binary
from cachelab.hosts.local import start_server


def start_memcached(log_dir):
    return start_server("memcached", threads=1, memory_mb=64, cpus=(),
                        log=log_dir / "memcached.log")


@pytest.fixture
def memcached(tmp_path):
    with start_memcached(tmp_path) as server:
        yield server


@pytest.fixture
def three_memcached(tmp_path):
    servers = [start_memcached(tmp_path) for _ in range(3)]
    try:
        yield servers
    finally:
        for s in servers:
            s.stop()


@pytest.fixture(scope="session")
def proxy_binary():
    """The release proxy (built by `make test` before pytest runs)."""
    try:
        return find_binary("cachelab-proxy")
    except UserError as exc:
        pytest.fail(str(exc))
