"""Capture to trace on real traffic: tcpdump records loopback while a known request stream
goes to a real memcached, and the trace gives that stream back."""

from __future__ import annotations

import selectors
import shutil
import signal
import socket
import subprocess
import time

import pytest

from cachelab.commands import capture as capture_command
from cachelab.errors import UserError
from cachelab.hosts.local import start_server
from cachelab.readers.pcap import segments

BIG = 200_000  # larger than loopback's MTU: the value spans several segments


def _stream():
    """Each connection's requests: (bytes to send, reply end, expected records)."""
    a = [
        (b"set a:1 0 30 100\r\n" + b"x" * 100 + b"\r\n", b"STORED\r\n", [("set", "a:1", 100, 30)]),
        (b"get a:1\r\n", b"END\r\n", [("get", "a:1", 100, 0)]),
        (b"get a:1 a:2\r\n", b"END\r\n", [("get", "a:1", 100, 0), ("get", "a:2", 0, 0)]),
        (b"add a:3 0 0 5\r\nhello\r\n", b"STORED\r\n", [("add", "a:3", 5, 0)]),
        (b"delete a:1\r\n", b"DELETED\r\n", [("delete", "a:1", 0, 0)]),
        (b"get a:1\r\n", b"END\r\n", [("get", "a:1", 0, 0)]),
        (b"set n 0 0 1\r\n5\r\n", b"STORED\r\n", [("set", "n", 1, 0)]),
        (b"incr n 2\r\n", b"7\r\n", [("incr", "n", 0, 0)]),
    ]
    b = [
        (b"set b:1 0 0 %d\r\n" % BIG + b"y" * BIG + b"\r\n", b"STORED\r\n",
         [("set", "b:1", BIG, 0)]),
        (b"gets b:1\r\n", b"END\r\n", [("gets", "b:1", BIG, 0)]),
        (b"append b:1 0 0 10\r\n" + b"z" * 10 + b"\r\n", b"STORED\r\n",
         [("append", "b:1", 10, 0)]),
        (b"get b:1\r\n", b"END\r\n", [("get", "b:1", BIG + 10, 0)]),
        (b"replace b:9 0 0 3\r\nabc\r\n", b"NOT_STORED\r\n", [("replace", "b:9", 3, 0)]),
    ]
    return a, b


def _ask(sock, request, end):
    sock.sendall(request)
    reply = b""
    deadline = time.monotonic() + 10
    while not reply.endswith(end):
        assert time.monotonic() < deadline, f"no reply to {request[:30]!r}: {reply[-60:]!r}"
        reply += sock.recv(1 << 20)


def _start_tcpdump(tcpdump, pcap, port):
    # --immediate-mode: packets handed over at once, not when a buffer block fills; -B: a
    # 32 MiB buffer (with the default, a packet was lost now and then on a loaded host).
    proc = subprocess.Popen([tcpdump, "-i", "lo", "-U", "--immediate-mode", "-B", "32768",
                             "-n", "-w", str(pcap), f"tcp port {port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + 15
        seen = b""
        while b"listening on" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None or not sel.select(left):
                proc.kill()
                proc.wait()
                pytest.fail(f"tcpdump did not start: {seen.decode(errors='replace')}")
            seen += proc.stderr.read1(4096)
    return proc


def _stop(proc, pcap, port, connections):
    # Packets tcpdump has not written when it is stopped are lost: wait until the capture
    # holds every connection's FIN to the server (sent as the test closed them), within a
    # bound, first.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            fins = sum(s.fin and s.dst[1] == port for s in segments(pcap))
        except UserError:
            fins = 0  # a packet half written
        if fins >= connections:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # tcpdump writes out what it holds, then exits
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _resp(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _redis_stream():
    a = [
        (_resp(b"SET", b"k", b"v" * 300, b"EX", b"30"), b"+OK\r\n", [("set", "k", 300, 30)]),
        (_resp(b"GET", b"k"), b"$300\r\n" + b"v" * 300 + b"\r\n", [("get", "k", 300, 0)]),
        (_resp(b"MGET", b"k", b"z"), b"*2\r\n$300\r\n" + b"v" * 300 + b"\r\n$-1\r\n",
         [("get", "k", 300, 0), ("get", "z", 0, 0)]),
        (_resp(b"DEL", b"k"), b":1\r\n", [("delete", "k", 0, 0)]),
    ]
    b = [
        (b"PING\r\n", b"+PONG\r\n", []),
        (_resp(b"SET", b"big", b"w" * BIG, b"NX"), b"+OK\r\n", [("add", "big", BIG, 0)]),
        (_resp(b"INCR", b"n"), b":1\r\n", [("incr", "n", 0, 0)]),
        (_resp(b"GET", b"big"), b"$%d\r\n" % BIG + b"w" * BIG + b"\r\n", [("get", "big", BIG, 0)]),
    ]
    return a, b


def _captured(server, tmp_path, streams):
    """The trace of `streams` (one per connection, sent interleaved) sent to `server`."""
    tcpdump = shutil.which("tcpdump")
    if tcpdump is None:
        pytest.skip("tcpdump is not installed (make deps installs it): nothing to capture with")
    pcap = tmp_path / "cachelab-capture.pcap"
    proc = _start_tcpdump(tcpdump, pcap, server.port)
    try:
        a, b = streams
        with socket.create_connection((server.host, server.port), timeout=10) as sa, \
                socket.create_connection((server.host, server.port), timeout=10) as sb:
            # Interleaved: a's first request, b's first, a's second, ...
            for i in range(max(len(a), len(b))):
                for sock, stream in ((sa, a), (sb, b)):
                    if i < len(stream):
                        _ask(sock, stream[i][0], stream[i][1])
    finally:
        _stop(proc, pcap, server.port, len(streams))
    out, capture = capture_command.run(pcap, server.port, out=tmp_path / "trace.csv")
    assert capture.connections == 2
    by_client = {}
    for r in capture.records:
        by_client.setdefault(r.client, []).append(
            (r.op, r.key.decode(), r.value_size, r.ttl))
    expected = [[rec for _, _, recs in stream for rec in recs] for stream in streams]
    assert list(by_client.values()) == expected
    times = [r.time for r in capture.records]
    assert times == sorted(times) and times[-1] > times[0]
    return out, capture


def test_a_tcpdump_capture_of_redis_traffic_gives_the_request_stream_back(tmp_path):
    with start_server("redis", threads=1, memory_mb=64, cpus=(),
                      log=tmp_path / "redis.log") as server:
        _captured(server, tmp_path, _redis_stream())


def test_a_tcpdump_capture_of_memcached_traffic_gives_the_request_stream_back(memcached,
                                                                             tmp_path):
    out, capture = _captured(memcached, tmp_path, _stream())
    lines = out.read_text().splitlines()
    assert len(lines) == len(capture.records)
    assert lines[0].startswith("0.000000,a:1,3,100,1,set,30")
