"""Shared fixtures: real servers on loopback, started and stopped by the tests."""

from __future__ import annotations

import pytest

from cachelab.binaries import find_binary
from cachelab.errors import UserError
from cachelab.procs import start_memcached


@pytest.fixture
def memcached():
    with start_memcached() as server:
        yield server


@pytest.fixture
def three_memcached():
    servers = [start_memcached() for _ in range(3)]
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
