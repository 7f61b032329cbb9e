"""Capture to trace, on packets built here: TCP put back in order, memcached text and RESP
requests and replies parsed, one record per key, the CSV written."""

from __future__ import annotations

import socket

import dpkt
import pytest

from cachelab.commands import capture as capture_command
from cachelab.errors import UserError
from cachelab.readers.capture import read_capture, requests_of, write_trace
from cachelab.readers.pcap import Segment

CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.0.2", 11211)


class Conn:
    """Segments of one connection, written as a test wants them (any order)."""

    def __init__(self, client=CLIENT, server=SERVER, isn=1000, server_isn=5000):
        self.client, self.server = client, server
        self.up_seq, self.down_seq = isn + 1, server_isn + 1
        self.isn, self.server_isn = isn, server_isn

    def syn(self, t):
        return [self._seg(t, True, self.isn, b"", syn=True),
                self._seg(t, False, self.server_isn, b"", syn=True)]

    def up(self, t, data):
        seg = self._seg(t, True, self.up_seq, data)
        self.up_seq += len(data)
        return seg

    def down(self, t, data):
        seg = self._seg(t, False, self.down_seq, data)
        self.down_seq += len(data)
        return seg

    def _seg(self, t, up, seq, data, syn=False):
        src, dst = (self.client, self.server) if up else (self.server, self.client)
        return Segment(time=t, src=src, dst=dst, seq=seq % (1 << 32), syn=syn, fin=False,
                       rst=False, payload=data)


def rows(capture):
    return [(r.client, r.op, r.key, r.value_size, r.ttl) for r in capture.records]


def test_memcached_requests_and_replies_give_one_record_per_key():
    c = Conn()
    packets = [*c.syn(1.0),
               c.up(1.1, b"set a 0 60 3\r\nabc\r\n"),
               c.down(1.15, b"STORED\r\n"),
               c.up(1.2, b"get a b\r\ngets a\r\n"),
               c.down(1.25, b"VALUE a 0 3\r\nabc\r\nEND\r\nVALUE a 0 3 9\r\nabc\r\nEND\r\n"),
               c.up(1.3, b"delete a noreply\r\nincr n 1\r\nstats\r\n"),
               c.down(1.35, b"NOT_FOUND\r\nSTAT pid 1\r\nEND\r\n")]
    got = requests_of(packets, 11211)
    assert rows(got) == [(1, "set", b"a", 3, 60), (1, "get", b"a", 3, 0),
                         (1, "get", b"b", 0, 0), (1, "gets", b"a", 3, 0),
                         (1, "delete", b"a", 0, 0), (1, "incr", b"n", 0, 0)]
    assert [r.time for r in got.records] == [1.1, 1.2, 1.2, 1.2, 1.3, 1.3]


def test_out_of_order_and_retransmitted_segments_are_read_once_in_order():
    c = Conn()
    first, second = c.up(1.0, b"set k 0 0 5\r\nhe"), c.up(1.1, b"llo\r\nget k\r\n")
    reply = c.down(1.2, b"VALUE k 0 5\r\nhello\r\nEND\r\n")
    # The second segment arrives first, then the first twice, the reply in two pieces.
    packets = [*c.syn(0.9), second, first, first, reply]
    got = requests_of(packets, 11211)
    assert rows(got) == [(1, "set", b"k", 5, 0), (1, "get", b"k", 5, 0)]


def test_a_stream_caught_mid_request_starts_at_the_next_request():
    c = Conn()
    packets = [c.up(1.0, b"lue-of-a-set\r\nget x\r\n"),
               c.down(1.05, b"D\r\nVALUE x 0 2\r\nhi\r\nEND\r\n")]
    assert rows(requests_of(packets, 11211)) == [(1, "get", b"x", 2, 0)]


def test_a_lost_segment_is_given_up_and_reading_goes_on():
    c = Conn()
    c.up(1.0, b"set lost 0 0 1\r\nx\r\n")  # never captured
    packets = [*c.syn(0.9), c.up(1.1, b"get y\r\n"), c.down(1.2, b"END\r\n")]
    assert rows(requests_of(packets, 11211)) == [(1, "get", b"y", 0, 0)]


def test_resp_commands_map_to_trace_operations_with_reply_sizes():
    c = Conn(server=("10.0.0.2", 6379))
    packets = [*c.syn(1.0),
               c.up(1.1, b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n$2\r\nEX\r\n$2\r\n10\r\n"
                         b"*3\r\n$4\r\nMGET\r\n$1\r\nk\r\n$1\r\nz\r\nPING\r\n"),
               c.down(1.2, b"+OK\r\n*2\r\n$2\r\nvv\r\n$-1\r\n+PONG\r\n"),
               c.up(1.3, b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"),
               c.down(1.4, b":1\r\n:1\r\n")]
    assert rows(requests_of(packets, 6379)) == [
        (1, "set", b"k", 2, 10), (1, "get", b"k", 2, 0), (1, "get", b"z", 0, 0),
        (1, "delete", b"k", 0, 0), (1, "incr", b"n", 0, 0)]


def test_each_connection_is_a_client_and_records_merge_by_time():
    a, b = Conn(), Conn(client=("10.0.0.1", 40001))
    packets = [*a.syn(1.0), *b.syn(1.0), a.up(1.1, b"delete x\r\n"),
               b.up(1.15, b"delete y\r\n"), a.up(1.2, b"delete z\r\n")]
    got = requests_of(packets, 11211)
    assert [(r.client, r.key) for r in got.records] == [(1, b"x"), (2, b"y"), (1, b"z")]
    assert got.connections == 2


def _frame(seg):
    tcp = dpkt.tcp.TCP(sport=seg.src[1], dport=seg.dst[1], seq=seg.seq,
                       flags=dpkt.tcp.TH_SYN if seg.syn else dpkt.tcp.TH_ACK, data=seg.payload)
    ip = dpkt.ip.IP(src=socket.inet_aton(seg.src[0]), dst=socket.inet_aton(seg.dst[0]),
                    p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


@pytest.mark.parametrize("writer", [dpkt.pcap.Writer, dpkt.pcapng.Writer])
def test_pcap_and_pcapng_files_read_and_the_trace_is_csv(tmp_path, writer):
    c = Conn()
    packets = [*c.syn(1.0), c.up(1.5, b"get a\r\n"),
               c.down(1.6, b"VALUE a 0 4\r\nabcd\r\nEND\r\n"),
               c.up(2.25, b"set b,c 0 0 2\r\nxy\r\n")]
    path = tmp_path / "cachelab-test.pcap"
    with path.open("wb") as f:
        w = writer(f)
        for seg in packets:
            w.writepkt(_frame(seg), ts=seg.time)
    capture = read_capture(path, 11211)
    out = tmp_path / "trace.csv"
    write_trace(capture.records, out)
    assert out.read_text() == "0.000000,a,1,4,1,get,0\n0.750000,b,c,3,2,1,set,0\n"


def test_the_command_refuses_a_capture_without_requests_and_a_damaged_file(tmp_path):
    path = tmp_path / "empty.pcap"
    with path.open("wb") as f:
        dpkt.pcap.Writer(f)
    with pytest.raises(UserError, match="no memcached or Redis request to port 11211"):
        capture_command.run(path, 11211)
    damaged = tmp_path / "damaged.pcap"
    damaged.write_bytes(b"not a capture at all")
    with pytest.raises(UserError, match="is not a pcap or pcapng capture"):
        capture_command.run(damaged, 11211)
    with pytest.raises(UserError, match="--port 0 is not a TCP port"):
        capture_command.run(path, 0)


def test_a_capture_cut_inside_a_packet_is_refused(tmp_path):
    c = Conn()
    path = tmp_path / "cachelab-cut.pcap"
    with path.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for seg in [*c.syn(1.0), c.up(1.5, b"get a\r\n")]:
            w.writepkt(_frame(seg), ts=seg.time)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(UserError, match="a truncated or damaged capture"):
        read_capture(path, 11211)


def test_auto_tells_resp_from_memcached_even_mid_stream_or_inline():
    ping = Conn(server=("10.0.0.2", 6379))
    packets = [*ping.syn(1.0), ping.up(1.1, b"PING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"),
               ping.down(1.2, b"+PONG\r\n$-1\r\n")]
    assert rows(requests_of(packets, 6379)) == [(1, "get", b"k", 0, 0)]
    mid = Conn(server=("10.0.0.2", 6379))
    packets = [mid.up(1.0, b"xx\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"), mid.down(1.1, b":1\r\n")]
    assert rows(requests_of(packets, 6379)) == [(1, "delete", b"k", 0, 0)]
