"""The throughput a topology's links allow a workload: the bound the original study drew on
its throughput plots (a 4 KiB read-only load capped by a server's upload). Pure.

For every host and direction, the bytes a request puts on that host's link on average,
B(host, dir), follow from the protocol the servers speak (the middleware speaks it to both
sides), for memcached the text protocol (values of `data_size` bytes, keys of `key_len`):

    get request   g_q = len("get <key>\\r\\n")              (k keys: k keys in one line)
    get reply     g_r = k x len("VALUE <key> 0 <size>\\r\\n<data>\\r\\n") + len("END\\r\\n")
    set request   s_q = len("set <key> 0 0 <size>\\r\\n<data>\\r\\n"),   set reply 8

and for Redis servers (RESP2, as cachelab-load composes it: every command an array of bulk
strings, `$<n>\r\n<bytes>\r\n`, written bulk(n) below)

    get request   g_q = len("*2\r\n") + bulk(3) + bulk(key_len)        (k > 1 keys: MGET,
                  len("*<k+1>\r\n") + bulk(4) + k x bulk(key_len))
    get reply     g_r = bulk(size)                    (MGET: len("*<k>\r\n") + k x bulk(size))
    set request   s_q = len("*3\r\n") + bulk(3) + bulk(key_len) + bulk(size),  reply "+OK\r\n" 5

each message on the wire as its bytes plus 66 bytes of Ethernet, IP and TCP headers per
segment of at most 1448 bytes (MSS with timestamps). With w the share of sets and N
servers, M middlewares, and the shares of the clients as the run placed them
(spec/placement.py: 3 instances over 2 middlewares put 2/3 on the first with
`load.placement = "round-robin"`, 1/2 each with "even"):
- load host: up w s_q + (1-w) g_q, down w 8 + (1-w) g_r (times its instances' share);
- middleware: down from clients and from servers, up to clients and servers: a set goes to
  all N servers, a get's reply bytes come from the servers and go to the client (times
  its share of the clients, so the busiest middleware's link sets the bound);
- server (behind middlewares): a set from every middleware reaches every server, a get
  reaches one (1/N of the reply bytes per server); without middlewares a server carries
  the instances that target it.
The bound is  X_max = min over hosts and directions of  rate(host, dir) / B(host, dir),
rate in bytes/s of L2 frames (what TBF counts): the configured egress_mbit (up) or
ingress_mbit (down) / 8, or the measured iperf3 goodput converted back to frames
(x 1514 / 1448). A direction at rate 0 is unshaped and sets no bound: with egress-only
shaping (the study's cloud) only the uploads count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cachelab.spec.experiment import RunConfig, ServerKind
from cachelab.spec.topology import Layout

MSS = 1448
HEADERS = 66  # Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12


def wire(n: float) -> float:
    """Bytes on the wire for an application message of n bytes."""
    return n + HEADERS * max(1, math.ceil(n / MSS))


@dataclass(frozen=True)
class Bound:
    ops_per_s: float
    #: The link that sets it: "server1 up", ...
    limit: str


def _bulk(n: int) -> int:
    """A RESP bulk string of n bytes: `$<n>\r\n<bytes>\r\n`."""
    return 1 + len(str(n)) + 2 + n + 2


def _array(n: int) -> int:
    """A RESP array's header: `*<n>\r\n`."""
    return 1 + len(str(n)) + 2


def resp_sizes(config: RunConfig, key_len: int) -> tuple[float, float, float, float]:
    """(get request, get reply, set request, set reply) bytes of one Redis request (the
    module doc's RESP equations): GET, or MGET for more than one key."""
    w = config.workload
    keys = w.multiget_keys
    if keys > 1:
        get_q = _array(keys + 1) + _bulk(4) + keys * _bulk(key_len)
        get_r = _array(keys) + keys * _bulk(w.data_size)
    else:
        get_q = _array(2) + _bulk(3) + _bulk(key_len)
        get_r = _bulk(w.data_size)
    set_q = _array(3) + _bulk(3) + _bulk(key_len) + _bulk(w.data_size)
    return get_q, get_r, set_q, 5


def message_sizes(config: RunConfig, key_len: int) -> tuple[float, float, float, float]:
    """(get request, get reply, set request, set reply) bytes of one request, in the
    protocol the servers speak (the middleware speaks its servers' protocol to both
    sides)."""
    if config.servers.kind == ServerKind.REDIS:
        return resp_sizes(config, key_len)
    w = config.workload
    keys = max(1, w.multiget_keys)
    size = len(str(w.data_size))
    get_q = 4 + keys * (key_len + 1) + 1
    get_r = keys * (6 + key_len + 3 + size + 2 + w.data_size + 2) + 5
    set_q = 4 + key_len + 5 + size + 2 + w.data_size + 2
    return get_q, get_r, set_q, 8


def bytes_per_request(config: RunConfig, layout: Layout,
                      key_len: int) -> dict[tuple[str, str], float]:
    """B(host, direction) of the module's equations, keyed (host name, "up"/"down")."""
    sets, gets = (int(x) for x in config.workload.ratio.split(":"))
    ws = sets / (sets + gets)
    wg = 1 - ws
    gq, gr, sq, sr = (wire(x) for x in message_sizes(config, key_len))
    need: dict[tuple[str, str], float] = {}

    def add(host: int, up: float, down: float) -> None:
        name = layout.hosts[host].name
        need[(name, "up")] = need.get((name, "up"), 0.0) + up
        need[(name, "down")] = need.get((name, "down"), 0.0) + down

    placed = config.placement
    for host, share in zip(layout.loads, placed.instance_shares(), strict=True):
        add(host, share * (ws * sq + wg * gq), share * (ws * sr + wg * gr))
    n = len(layout.servers)
    if layout.middlewares:
        shares = placed.shares(len(layout.middlewares))
        for host, share in zip(layout.middlewares, shares, strict=True):
            add(host, share * (ws * (sr + n * sq) + wg * (gr + gq)),
                share * (ws * (sq + n * sr) + wg * (gq + gr)))
        for host in layout.servers:
            add(host, ws * sr + wg * gr / n, ws * sq + wg * gq / n)
    else:
        # Sharded by the load generators, every server has about 1/n of the keys (ketama
        # with equal weights), so 1/n of the requests.
        shares = (1 / n,) * n if config.load.shard else placed.shares(n)
        for host, share in zip(layout.servers, shares, strict=True):
            add(host, share * (ws * sr + wg * gr), share * (ws * sq + wg * gq))
    return need


def bound(config: RunConfig, layout: Layout, key_len: int,
          rates_bytes: dict[tuple[str, str], float]) -> Bound | None:
    """The link bound on throughput; `rates_bytes` maps (host name, "up"/"down") to that
    direction's rate in frame bytes/s (left out, or 0: unshaped). None when nothing is
    shaped."""
    best: Bound | None = None
    for (host, direction), per_request in bytes_per_request(config, layout, key_len).items():
        rate = rates_bytes.get((host, direction), 0.0)
        if rate <= 0 or per_request <= 0:
            continue
        x = rate / per_request
        if best is None or x < best.ops_per_s:
            best = Bound(x, f"{host} {direction}")
    return best


def configured_rates(layout: Layout) -> dict[tuple[str, str], float]:
    """Each host's egress ("up") and ingress ("down") rate in bytes/s, where shaped."""
    rates = {}
    for h in layout.hosts:
        for direction, mbit in (("up", h.egress_mbit), ("down", h.ingress_mbit)):
            if mbit > 0:
                rates[(h.name, direction)] = mbit * 1e6 / 8
    return rates
