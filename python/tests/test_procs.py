"""Whose listener is on a port: a server that could not bind must not pass for started
because another process listens on the port it was given."""

from __future__ import annotations

import socket
import subprocess
import sys

import psutil

from cachelab.hosts.procs import free_port, listens, wait_for_port

LISTEN = ("import socket, sys, time\n"
          "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
          "time.sleep(30)\n")


def test_a_listener_is_found_on_its_own_process_and_not_on_another():
    port = free_port()
    child = subprocess.Popen([sys.executable, "-c", LISTEN, str(port)])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert wait_for_port("127.0.0.1", port)
        assert listens(child, port)
        assert not listens(child, port + 1 if port < 65535 else port - 1)
        # What `start_server` meets when the port was taken first: someone listens, but
        # not the process it started.
        assert not listens(idle, port)
    finally:
        for p in (child, idle):
            p.kill()
            p.wait()
    assert not listens(child, port), "a process that has exited listens on nothing"


def test_a_listener_in_a_child_of_the_started_process_counts():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    wrapper = subprocess.Popen(["sh", "-c", f'"{sys.executable}" -c "$1" {port}; :', "sh",
                                LISTEN])
    try:
        assert wait_for_port("127.0.0.1", port)
        assert listens(wrapper, port)
    finally:
        for child in psutil.Process(wrapper.pid).children(recursive=True):
            child.kill()
        wrapper.kill()
        wrapper.wait()
