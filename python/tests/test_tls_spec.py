"""TLS and Unix sockets in the experiment file: the keys, their defaults, sweeping them, each
mistake one line naming the field; and the command lines they give each process."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.hosts import local, tls
from cachelab.hosts.procs import Managed
from cachelab.readers import loadgen
from cachelab.run.transport import Wiring
from cachelab.spec import experiment as spec

BASE = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
"""

FILES = tls.TlsFiles(Path("/k"), Path("/k/ca.pem"), tls.Pair(Path("/k/s.pem"), Path("/k/s.key")),
                     tls.Pair(Path("/k/m.pem"), Path("/k/m.key")))


def parse(sections: str) -> spec.Experiment:
    return spec.parse(BASE + sections)


def error(sections: str) -> str:
    with pytest.raises(UserError) as info:
        parse(sections)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_tls_and_unix_sockets_are_off_by_default():
    c = parse("").points[0].config
    assert (c.servers.tls, c.servers.unix_socket, c.middleware.tls, c.middleware.unix_socket,
            c.load.tls) == (False, False, False, False, None)
    assert not c.tls and not c.client_tls


def test_the_load_generators_follow_their_target():
    direct = parse("[middleware]\ncount = 0\n[servers]\ntls = true\n").points[0].config
    assert direct.client_tls and direct.tls
    # Through a plain middleware to TLS servers: the clients' hop is plain.
    behind = parse("[servers]\ntls = true\n").points[0].config
    assert behind.tls and not behind.client_tls
    listener = parse("[middleware]\ntls = true\n").points[0].config
    assert listener.tls and listener.client_tls
    # A middleware's TLS means nothing without one.
    nothing = parse("[middleware]\ncount = 0\ntls = true\n").points[0].config
    assert not nothing.tls


def test_tls_is_a_factor_with_two_levels():
    e = parse('[middleware]\ncount = 0\n[sweep.factors]\n"servers.tls" = [false, true]\n'
              '"servers.kind" = ["memcached", "redis"]\n')
    assert [(p.config.servers.kind, p.config.servers.tls) for p in e.points] == [
        ("memcached", False), ("redis", False), ("memcached", True), ("redis", True)]
    assert [p.label for p in e.points][:2] == ["servers.tls=false, servers.kind=memcached",
                                               "servers.tls=false, servers.kind=redis"]


def test_the_ready_experiment_pairs_every_tls_point_with_a_plain_one():
    e = spec.load(Path(__file__).parents[2] / "experiments" / "tls-cost.toml")
    configs = [p.config for p in e.points]
    assert len(configs) == 12
    assert {(c.servers.kind, c.middleware.count) for c in configs} == {
        ("memcached", 0), ("redis", 0), ("memcached", 1), ("redis", 1)}
    assert sum(1 for c in configs if not c.tls) == 4
    assert all(c.topology.kind == "local" for c in configs)


@pytest.mark.parametrize(("sections", "expected"), [
    ("[servers]\ntls = 1\n", "servers.tls: expected true or false, got an integer 1"),
    ("[middleware]\ntls = \"yes\"\n", "middleware.tls: expected true or false, got a string"),
    ("[load]\ntls = 0\n", "load.tls: expected true or false, got an integer 0"),
    ("[servers]\nunix_sockets = true\n", "servers.unix_sockets: unknown field"),
    ("[servers]\ntls = true\nunix_socket = true\n[middleware]\ncount = 0\n",
     "servers.unix_socket: not with servers.tls (memcached and Redis serve TLS on TCP only)"),
    ("[middleware]\ntls = true\nunix_socket = true\n",
     "middleware.unix_socket: not with middleware.tls"),
    ("[middleware]\ncount = 0\n[load]\ntls = true\n",
     "load.tls: true, but the load generators talk to the servers, which serve plain TCP "
     "(servers.tls = false)"),
    ("[servers]\ntls = true\n[load]\ntls = true\n",
     "load.tls: true, but the load generators talk to the middleware, which serves plain TCP"),
    ("[middleware]\ntls = true\n[load]\ntls = false\n",
     "load.tls: false, but the load generators talk to the middleware, which serves TLS"),
    ("[servers]\nunix_socket = true\n[topology]\nkind = \"netns\"\n",
     'servers.unix_socket: only on topology.kind = "local"'),
    ("[middleware]\nunix_socket = true\n[topology]\nkind = \"netns\"\n",
     'middleware.unix_socket: only on topology.kind = "local"'),
    ("[servers]\ntls = true\n[topology]\nkind = \"ssh\"\n[[topology.host]]\nname = \"a\"\n"
     "address = \"10.0.0.1\"\n", 'servers.tls: not on topology.kind = "ssh"'),
    ('[sweep.factors]\n"servers.tls" = [false, 2]\n',
     "sweep.factors.servers.tls[1]: servers.tls: expected true or false, got an integer 2"),
])
def test_each_mistake_is_one_line_naming_the_field(sections, expected):
    assert expected in error(sections)


def test_a_load_tls_that_agrees_is_accepted():
    c = parse("[middleware]\ncount = 0\n[servers]\ntls = true\n[load]\ntls = true\n")
    assert c.points[0].config.load.tls is True


# -- command lines -------------------------------------------------------------------------

def test_memcached_serves_tls_with_the_servers_certificate():
    argv = local.server_argv("memcached", 11211, 1, 64, as_root=False,
                             options=local.ServerOptions(certificates=FILES))
    assert argv[1:5] == ["-l", "127.0.0.1", "-p", "11211"]
    assert argv[5:8] == ["-Z", "-o", "ssl_chain_cert=/k/s.pem,ssl_key=/k/s.key"]


def test_redis_serves_tls_only_and_asks_no_client_certificate():
    argv = local.server_argv("redis", 6400, 1, 64,
                             options=local.ServerOptions("redis", certificates=FILES))
    joined = " ".join(argv)
    assert "--port 0 --tls-port 6400" in joined
    assert "--tls-cert-file /k/s.pem --tls-key-file /k/s.key --tls-ca-cert-file /k/ca.pem" \
        in joined
    assert "--tls-auth-clients no" in joined
    assert argv.count("--port") == 1


@pytest.mark.parametrize("kind", ["memcached", "redis"])
def test_a_unix_socket_server_has_no_tcp_port(kind):
    argv = local.server_argv(kind, 7000, 1, 64, as_root=False,
                             options=local.ServerOptions(kind, socket=Path("/s/x.sock")))
    joined = " ".join(argv)
    if kind == "memcached":
        assert "-s /s/x.sock" in joined and "-p" not in argv
    else:
        assert "--port 0 --unixsocket /s/x.sock" in joined and "7000" not in joined


def test_the_wiring_gives_every_hop_its_options():
    c = parse("[servers]\ntls = true\n[middleware]\ntls = true\n").points[0].config
    wiring = Wiring(c, FILES)
    assert wiring.middleware(0).argv() == [
        "--tls-cert", "/k/m.pem", "--tls-key", "/k/m.key", "--server-tls",
        "--server-tls-ca", "/k/ca.pem", "--server-tls-sni", "cachelab-server"]
    proxy = Managed("cachelab-proxy", None, "127.0.0.1", 22122)  # type: ignore[arg-type]
    server = Managed("memcached", None, "127.0.0.1", 11211)  # type: ignore[arg-type]
    assert wiring.to_targets(proxy).argv("127.0.0.1", 22122) == [
        "--server", "127.0.0.1", "--port", "22122", "--tls", "--cacert=/k/ca.pem",
        "--sni=cachelab-middleware"]
    # The populate step writes to the servers directly, over their TLS.
    assert wiring.to_servers(server).argv("127.0.0.1", 11211)[-1] == "--sni=cachelab-server"


def test_a_unix_socket_target_replaces_server_and_port():
    c = parse("[servers]\nunix_socket = true\n[middleware]\ncount = 0\n").points[0].config
    wiring = Wiring(c, None, Path("/s"))
    assert wiring.server_socket(0) == Path("/s/server-0.sock")
    server = Managed("memcached", None, "127.0.0.1", 0,  # type: ignore[arg-type]
                     socket=Path("/s/server-0.sock"))
    argv = loadgen.run_argv(c, server.host, server.port, test_time=3, warmup=0.5,
                            cooldown=0.5, seed=1, json_out=Path("l.json"),
                            transport=wiring.to_targets(server))
    assert argv[:2] == ["-S", "/s/server-0.sock"] and "--server" not in argv
    assert server.address == "/s/server-0.sock"  # as the middleware's -m names it


def test_the_clock_that_ends_latencies_is_chosen_in_the_file():
    kw = dict(test_time=3, warmup=0.5, cooldown=0.5, seed=1, json_out=Path("l.json"))
    kernel = parse("").points[0].config
    assert "--timestamps" not in loadgen.run_argv(kernel, "h", 1, **kw)
    user = parse('[load]\ntimestamps = "user"\n').points[0].config
    argv = loadgen.run_argv(user, "h", 1, **kw)
    assert argv[argv.index("--timestamps") + 1] == "user"
    measure = loadgen.measure_argv(user, "h", 1, rate=100, **kw)
    assert measure[measure.index("--timestamps") + 1] == "user"
    assert "load.timestamps: must be one of kernel, user, got 'wall'" in error(
        '[load]\ntimestamps = "wall"\n')
