"""The load-generator adapter (argv, report) and the HDR decoder, on a real report."""

import json
from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.readers import hdr, loadgen
from cachelab.spec import experiment as spec

DATA = Path(__file__).parent / "data"
REPORT = DATA / "load-report.json"  # cachelab-load -t 1 -c 2 --test-time 3 --ratio 1:10


def config(extra: str = "") -> spec.RunConfig:
    return spec.parse(f"""
name = "t"
run_time_s = 3
warmup_s = 1
cooldown_s = 0.5
{extra}
[sweep.factors]
"load.clients" = [4]
""").points[0].config


def test_run_argv_carries_the_workload():
    argv = loadgen.run_argv(config("[workload]\nratio = \"1:0\"\nkey_pattern = \"zipf\"\n"
                                   "multiget_keys = 3\n"), "127.0.0.1", 1234,
                            test_time=3, warmup=1, cooldown=0.5, seed=9,
                            json_out=Path("/x.json"))
    joined = " ".join(argv)
    for part in ("--server 127.0.0.1 --port 1234", "-P memcache_text", "--clients 4",
                 "--ratio 1:0", "--key-pattern Z:Z", "--multiget-keys 3", "--test-time 3",
                 "--warmup 1 --cooldown 0.5", "--seed 9", "--json-out-file /x.json",
                 "--key-maximum 10000", "--zipf-exponent 1"):
        assert part in joined
    assert "--rate" not in argv


def test_open_loop_rate_is_split_over_instances_and_redis_speaks_resp():
    c = config("[servers]\nkind = \"redis\"\ncount = 2\n[middleware]\ncount = 0\n"
               "[load]\nmode = \"open\"\nrate = 3000")
    argv = loadgen.run_argv(c, "h", 1, test_time=3, warmup=1, cooldown=0, seed=1,
                            json_out=Path("o"))
    assert c.instances == 2
    assert argv[argv.index("--rate") + 1] == "1500"
    assert argv[argv.index("-P") + 1] == "redis"
    pop = loadgen.populate_argv(c, "h", 1, Path("p.json"))
    assert "--populate" in pop and pop[pop.index("--key-maximum") + 1] == "10000"


@pytest.mark.parametrize("mode", ["closed", "open"])
def test_busy_polling_is_passed_on_in_either_loop(mode):
    rate = "\nrate = 1000" if mode == "open" else ""
    argv = loadgen.run_argv(config(f"[load]\nmode = \"{mode}\"\nbusy_poll_us = 80{rate}"),
                            "h", 1, test_time=3, warmup=1, cooldown=0, seed=1,
                            json_out=Path("o"))
    assert argv[argv.index("--busy-poll-us") + 1] == "80"
    assert "--busy-poll-us" not in loadgen.run_argv(config(), "h", 1, test_time=3, warmup=1,
                                                    cooldown=0, seed=1, json_out=Path("o"))


def test_a_real_report_parses():
    r = loadgen.load(REPORT)
    assert (r.window_start_s, r.window_end_s) == (1.0, 2.5)
    assert r.summary["total"].ops == r.summary["set"].ops + r.summary["get"].ops == 90104
    assert r.summary["get"].latency_ms["p99"] == 0.058
    per_second = r.ops_per_second()
    assert sorted(per_second) == [0, 1, 2, 3] and per_second[0] == 62027
    assert r.totals["completed"] == 182003


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(schema="cachelab-load/9"),
    lambda d: d.pop("summary"),
    lambda d: d["series"][0].pop("get"),
])
def test_a_wrong_report_is_a_user_error(mutate):
    doc = json.loads(REPORT.read_text())
    mutate(doc)
    with pytest.raises(UserError):
        loadgen.parse(json.dumps(doc))


def test_hdr_percentiles_equal_the_tools_own():
    doc = json.loads(REPORT.read_text())
    for op in ("set", "get", "total"):
        h = hdr.decode(doc["histograms"][op])
        lat = doc["summary"][op]["latency_ms"]
        assert h.total == doc["summary"][op]["ops"]
        assert [h.quantile(q) / 1000 for q in (0.5, 0.9, 0.99, 0.999)] == \
            [lat["p50"], lat["p90"], lat["p99"], lat["p999"]]
        assert h.max() / 1000 == lat["max"]
    for line in (DATA / "proxy-stats.jsonl").read_text().splitlines():
        window = json.loads(line)
        for o in window.get("ops", {}).values():
            h = hdr.decode(o["rt_hdr"])
            p = o["rt_percentiles_us"]
            assert h.total == o["count"]
            assert (h.quantile(0.5), h.quantile(0.99), h.max()) == (p["p50"], p["p99"], p["max"])


def test_hdr_merge_adds_counts():
    doc = json.loads(REPORT.read_text())
    merged = hdr.merge_all([doc["histograms"]["set"], doc["histograms"]["get"]])
    total = hdr.decode(doc["histograms"]["total"])
    assert merged.counts == total.counts
    assert hdr.merge_all([]) is None
    with pytest.raises(hdr.HdrError):
        hdr.decode("bm90IGEgaGlzdG9ncmFt")


def test_the_quantile_rule_is_the_rust_crates_where_hdrh_rounds_the_rank():
    # hdrh's get_value_at_percentile takes the rank round(q x n); the tools (the Rust
    # crate) take ceil(q x n). On some of these windows their p99s differ.
    from hdrh.histogram import HdrHistogram

    differ = 0
    for line in (DATA / "proxy-stats.jsonl").read_text().splitlines():
        for o in json.loads(line).get("ops", {}).values():
            ours = hdr.decode(o["rt_hdr"]).quantile(0.99)
            assert ours == o["rt_percentiles_us"]["p99"]
            differ += HdrHistogram.decode(o["rt_hdr"]).get_value_at_percentile(99) != ours
    assert differ > 0


def test_histograms_of_other_layouts_do_not_merge():
    from hdrh.histogram import HdrHistogram

    coarse = HdrHistogram(1, 60_000_000, 2)
    coarse.record_value(1000)
    doc = json.loads(REPORT.read_text())
    with pytest.raises(hdr.HdrError, match="layouts"):
        hdr.merge_all([doc["histograms"]["set"], coarse.encode().decode()])
