"""Points named as a reader says them (spec/naming.py): each rule by its test."""

from cachelab.spec import naming


def test_ratio_0_1_reads_read_only_1_0_write_only_and_others_sets_gets():
    assert naming.ratio_name("0:1") == "read-only"
    assert naming.ratio_name("1:0") == "write-only"
    assert naming.ratio_name("0:10") == "read-only"
    assert naming.ratio_name("1:9") == "sets:gets 1:9"
    assert naming.ratio_name("1:1") == "sets:gets 1:1"


def test_a_point_reads_as_its_levels_in_the_sweeps_order():
    factors = {"workload.ratio": "0:1", "middleware.workers": 8, "load.clients": 16}
    assert naming.point_name(factors, clients=16) == "read-only, 8 workers, 16 clients"
    assert naming.point_name({"middleware.workers": 1, "load.clients": 1}, 1) == \
        "1 worker, 1 client"


def test_the_total_of_clients_is_added_where_the_client_factor_is_not_it():
    # 3 instances x 32 connections: the factor's level is not what the system saw.
    assert naming.point_name({"load.clients": 32}, clients=96) == \
        "96 clients (32 per load thread)"
    assert naming.point_name({"load.threads": 2, "load.clients": 4}, clients=8) == \
        "2 client threads, 4 clients, 8 clients in all"
    assert naming.point_name({"servers.count": 3}, clients=96) == "3 servers"


def test_counts_sizes_rates_and_switches_read_as_words():
    assert naming.level_name("middleware.count", 2) == "2 middlewares"
    assert naming.level_name("servers.count", 1) == "1 server"
    assert naming.level_name("servers.kind", "redis") == "Redis"
    assert naming.level_name("workload.data_size", 4096) == "4 KiB values"
    assert naming.level_name("workload.data_size", 100) == "100-byte values"
    assert naming.level_name("load.rate", 20000.0) == "20,000 ops/s offered"
    assert naming.level_name("middleware.sharded", True) == "sharded"
    assert naming.level_name("middleware.sharded", False) == "replicated"
    assert naming.level_name("servers.cpus", []) == "servers on any CPU"
    assert naming.level_name("load.cpus", [1]) == "load on CPU 1"


def test_an_unknown_factor_reads_as_the_last_part_of_its_path():
    assert naming.level_name("workload.key_maximum", 1000) == "key maximum 1000"


def test_no_factors_is_base_and_a_curve_without_fixed_factors_is_all_points():
    assert naming.point_name({}) == "base"
    assert naming.curve_name([]) == "all points"
    assert naming.curve_name([("workload.ratio", "1:0"), ("middleware.workers", 32)]) == \
        "write-only, 32 workers"


def test_a_factor_reads_by_what_it_sets_never_by_its_path():
    assert naming.factor_name("workload.ratio") == "sets:gets ratio"
    assert naming.factor_name("middleware.workers") == "workers per middleware"
    assert naming.factor_name("load.rate") == "offered rate (ops/s)"
    assert naming.factor_name("workload.key_maximum") == "key maximum"
