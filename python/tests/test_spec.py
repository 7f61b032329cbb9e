"""Experiment files: valid ones load, each kind of mistake is one line naming the field."""

import json
from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.spec import experiment as spec
from cachelab.spec import sweep
from cachelab.spec.order import Order

EXPERIMENTS = Path(__file__).parents[2] / "experiments"

MINIMAL = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[sweep.factors]
"load.clients" = [1, 2]
"""


def top(line: str) -> str:
    """MINIMAL with a top-level line (before its first table)."""
    return line + "\n" + MINIMAL


def parse_error(text: str) -> str:
    with pytest.raises(UserError) as info:
        spec.parse(text)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_experiment_loads(path):
    experiment = spec.load(path)
    assert experiment.points and experiment.name
    assert "run time" in path.read_text().lower()  # each file states how long it takes


def test_a_minimal_file_gets_the_defaults():
    e = spec.parse(MINIMAL)
    assert (e.repetitions, e.topology, e.qos_target_ms, e.max_repetitions) == (3, "local", 1, 5)
    assert e.validation.cv_threshold == 0.05
    assert [p.factors for p in e.points] == [(("load.clients", 1),), (("load.clients", 2),)]
    c = e.points[1].config
    assert (c.servers.kind, c.middleware.count, c.middleware.workers) == ("memcached", 1, 16)
    assert c.total_clients == 2 and c.targets == 1
    assert e.digest == spec.parse(MINIMAL).digest != spec.parse(MINIMAL + "\n#").digest


def test_dotted_and_quoted_factor_keys_mean_the_same():
    quoted = spec.parse(MINIMAL)
    dotted = spec.parse(MINIMAL.replace('"load.clients"', "load.clients"))
    assert [p.factors for p in quoted.points] == [p.factors for p in dotted.points]


def test_points_are_crossed_with_the_factors_in_file_order():
    e = spec.parse(MINIMAL + """
"middleware.workers" = [8, 32]
[[sweep.points]]
servers.count = 1
[[sweep.points]]
servers.count = 3
middleware.sharded = true
""")
    assert len(e.points) == 2 * 2 * 2
    assert e.points[0].label == "servers.count=1, load.clients=1, middleware.workers=8"
    assert e.points[1].label == "servers.count=1, load.clients=1, middleware.workers=32"
    last = e.points[-1]
    assert last.config.servers.count == 3 and last.config.middleware.sharded
    assert last.config.load.clients == 2 and last.config.middleware.workers == 32
    assert [p.index for p in e.points] == list(range(8))


def test_a_file_without_a_sweep_is_one_point():
    for text in (MINIMAL.split("[sweep")[0], MINIMAL.split("[sweep")[0] + "[sweep]\n"):
        e = spec.parse(text + "[load]\nclients = 4\n")
        assert len(e.points) == 1 and e.factor_paths == ()
        (only,) = e.points
        assert (only.index, only.factors, only.label) == (0, (), "base")
        assert only.config.load.clients == 4 and e.repetitions == 3 and e.max_repetitions == 5


def test_the_one_point_experiment_is_its_configuration_repeated():
    e = spec.load(EXPERIMENTS / "one-point.toml")
    assert [p.factors for p in e.points] == [()]
    c = e.points[0].config
    assert (c.servers.count, c.middleware.count, c.middleware.workers, c.total_clients) == (
        3, 1, 16, 8)
    assert e.repetitions == 3


def test_sweep_expand_is_a_nested_loop():
    assert sweep.expand([], [("a", [1, 2]), ("b", ["x", "y"])]) == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    assert sweep.expand([{"c": 0}, {"c": 1}], []) == [{"c": 0}, {"c": 1}]


def test_open_loop_and_redis_parse():
    e = spec.parse(MINIMAL.replace("[sweep.factors]", """
[servers]
kind = "redis"
threads = 2
[middleware]
count = 0
[load]
mode = "open"
rate = 1000
[sweep.factors]"""))
    c = e.points[0].config
    assert (c.servers.kind, c.load.mode, c.load.rate, c.targets) == ("redis", "open", 1000.0, 1)


def test_words_from_a_fixed_set_are_enum_members_that_keep_their_words():
    e = spec.parse(top('order = "interleaved"').replace("[sweep.factors]", """
[servers]
pinning = "none"
[load]
mode = "open"
rate = 10
protocol = "text"
[sweep.factors]
"servers.kind" = ["memcached"]"""))
    c = e.points[0].config
    assert c.load.mode is spec.LoadMode.OPEN and c.servers.kind is spec.ServerKind.MEMCACHED
    assert c.servers.pinning is spec.Pinning.NONE and c.load.protocol is spec.WireProtocol.TEXT
    assert c.topology.kind is spec.TopologyKind.LOCAL and e.order is Order.INTERLEAVED
    assert c.servers.redis_persistence is spec.Persistence.OFF
    # stored as the plain words, and read back as the members
    stored = json.loads(json.dumps(spec.config_dict(c)))
    assert (stored["load"]["mode"], stored["servers"]["pinning"]) == ("open", "none")
    assert spec.config_from_dict(stored) == c
    assert spec.config_from_dict(stored).load.mode is spec.LoadMode.OPEN
    level = dict(e.points[0].factors)["servers.kind"]
    assert level == "memcached" and type(level) is str  # a factor's level as written


@pytest.mark.parametrize(("text", "expected"), [
    (top("colour = 1"), "colour: unknown field"),
    (MINIMAL + "[servers]\nthread = 2\n", "servers.thread: unknown field"),
    (MINIMAL + "[servers]\nthreads = \"two\"\n",
     "servers.threads: expected an integer, got a string 'two'"),
    (MINIMAL + "[middleware]\npipeline = 0\n", "middleware.pipeline: must be >= 1, got 0"),
    (MINIMAL + "[middleware]\nsharded = 1\n",
     "middleware.sharded: expected true or false, got an integer 1"),
    (MINIMAL + "[servers]\nkind = \"mongodb\"\n",
     "servers.kind: must be one of memcached, redis, got 'mongodb'"),
    (MINIMAL + "[workload]\nratio = \"1-10\"\n",
     'workload.ratio: expected "S:G" with integers'),
    (MINIMAL.replace("[1, 2]", "[]"), "sweep.factors.load.clients: empty list of levels"),
    (MINIMAL.split("[sweep")[0] + "sweep = 3\n",
     "sweep: must be a table ([sweep]), got an integer"),
    (MINIMAL.replace("[1, 2]", "[1, 0]"),
     "sweep.factors.load.clients[1]: load.clients: must be >= 1, got 0"),
    (MINIMAL + '"load.clinets" = [1]\n',
     "sweep.factors.load.clinets: unknown field"),
    (MINIMAL + "[[sweep.points]]\n", "sweep.points[1]: empty point"),
    (MINIMAL + '[[sweep.points]]\n"load.clients" = 3\n',
     "sweep.points[1].load.clients: also a factor"),
    (MINIMAL.replace("name = \"t\"", ""), "name: missing"),
    (top('topology = "ssh"'), 'topology.host: topology.kind = "ssh" needs its hosts'),
    (MINIMAL + '[topology]\nkind = "ssh"\n[[topology.host]]\nname = "a"\n',
     "topology.host[1].address: missing"),
    (MINIMAL + '[topology]\nkind = "ssh"\ndelay_ms = 1\n[[topology.host]]\nname = "a"\n'
     'address = "10.0.0.1"\n', 'topology.delay_ms: only for kind = "netns"'),
    (MINIMAL + '[topology]\nkind = "netns"\n[[topology.host]]\nname = "a"\n'
     'address = "10.0.0.1"\n', "topology.host[1].address: cachelab chooses"),
    (top('topology = "cloud"'), "topology.kind: must be one of local, netns, ssh"),
    (MINIMAL + '[topology]\nkind = "netns"\nlink_mbit = -1\n',
     "topology.link_mbit: must be >= 0, got -1"),
    (MINIMAL + '[topology]\nkind = "netns"\n[[topology.host]]\nname = "a"\nroles = ["db"]\n',
     "topology.host[1].roles: must be a list of server, middleware, load, measure, got 'db'"),
    (MINIMAL + '[topology]\nkind = "netns"\n[[topology.host]]\nname = "a"\n'
     'roles = ["server"]\n', "topology.host: no host has the role 'middleware'"),
    (MINIMAL + '[topology]\nkind = "netns"\n[[topology.host]]\nname = "a b"\n',
     "topology.host[1].name: expected 1-20 letters"),
    (MINIMAL + '[topology]\nkind = "netns"\n[[topology.host]]\nname = "a"\ncpus = "x"\n',
     "topology.host[1].cpus: expected a cpuset"),
    (MINIMAL + '[topology]\n[[topology.host]]\nname = "a"\n',
     'topology.host: hosts need topology.kind = "netns"'),
    (MINIMAL.replace("run_time_s = 3", "run_time_s = 1"), "warmup_s: warm-up (0.5 s) plus"),
    (MINIMAL + '[servers]\nkind = "redis"\nextra_args = ["--requirepass", "x"]\n',
     "servers.extra_args: --requirepass: cachelab-load sends no AUTH"),
    (MINIMAL + '[servers]\nkind = "redis"\n[load]\nprotocol = "binary"\n',
     'load.protocol: "binary" is memcached\'s binary protocol'),
    (MINIMAL + '[servers]\nkind = "redis"\ngroup_size = 4\n',
     "servers.group_size: memcached's -R; Redis has no such option"),
    (MINIMAL + "[load]\nmode = \"open\"\n", "load.rate: missing"),
    (MINIMAL + "[load]\ncpus = [4096]\n", "load.cpus: CPU 4096 does not exist here"),
    (MINIMAL + "[servers]\ncount = 100000\n",
     "servers.count: 100000 is too many: the run would start 100002 processes"),
    (MINIMAL + "[load]\nthreads = 30000\n",
     "load.clients: 60000 client connections in all"),
    (MINIMAL + "[validation]\ncv_threshold = 0\n", "validation.cv_threshold: must be > 0"),
    (MINIMAL + "[report]\nx = \"load.speed\"\n", "report.x: 'load.speed' is not a field"),
    (top('order = "shuffled"'),
     "order: must be one of randomized, sweep, interleaved, got 'shuffled'"),
    (top("order = 1"), "order: expected a string, got an integer 1"),
    (MINIMAL + "[load]\nmode = true\n", "load.mode: expected a string, got a boolean True"),
    (top("repetitions = 1.5"), "repetitions: expected an integer, got a number 1.5"),
    ("name = [", "invalid TOML"),
])
def test_each_mistake_is_one_line_naming_the_field(text, expected):
    assert expected in parse_error(text)


def test_a_combination_error_names_the_point():
    message = parse_error(MINIMAL.replace('"load.clients" = [1, 2]',
                                          '"load.protocol" = ["text", "binary"]\n'
                                          '"middleware.count" = [0, 1]'))
    assert message.startswith(
        "sweep point 4 (load.protocol=binary, middleware.count=1): load.protocol:")


def test_redis_servers_may_sit_behind_the_middleware():
    e = spec.parse(MINIMAL.replace('"load.clients" = [1, 2]',
                                   '"servers.kind" = ["memcached", "redis"]\n'
                                   '"middleware.count" = [0, 1]')
                   + "[middleware]\nsharded = true\n[servers]\ntls = true\n")
    behind = [p.config for p in e.points if p.config.middleware.count]
    assert [c.servers.kind for c in behind] == ["memcached", "redis"]
    redis = behind[1]
    assert (redis.targets, redis.middleware.sharded, redis.servers.tls) == (1, True, True)


def test_load_prefixes_the_file_name(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL + "[servers]\nkind = 3\n")
    with pytest.raises(UserError, match=r"bad\.toml: servers\.kind: expected a string"):
        spec.load(path)


def test_a_netns_topology_with_hosts_and_a_swept_link():
    e = spec.parse(MINIMAL.replace('"load.clients" = [1, 2]', '"topology.link_mbit" = [50, 100]')
                   + '[topology]\nkind = "netns"\ndelay_ms = 0.45\ncpu_quota = 0.5\n'
                   '[[topology.host]]\nname = "srv"\nroles = ["server"]\ncpu_quota = 1\n'
                   '[[topology.host]]\nname = "rest"\nroles = ["middleware", "load"]\n'
                   'cpus = "0"\n')
    assert e.topology == "netns"
    assert [p.config.topology.link_mbit for p in e.points] == [50, 100]
    hosts = e.points[0].config.topology.host
    assert [(h.name, h.roles, h.cpu_quota, h.cpus) for h in hosts] == [
        ("srv", ("server",), 1.0, None), ("rest", ("middleware", "load"), None, "0")]
    assert spec.parse(top('topology = "netns"')).points[0].config.topology.kind == "netns"
