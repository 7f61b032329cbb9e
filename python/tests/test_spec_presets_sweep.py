"""`workload.preset` passed through to cachelab-load with the file's overrides, and a sweep
counted (and refused past its bound) before it is expanded."""

import time
from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.readers import loadgen
from cachelab.spec import experiment as spec
from cachelab.spec import presets, sweep

TWITTER_TABLE = (Path(__file__).parents[2] / "crates" / "cachelab-load" / "data"
                 / "twitter_2020Mar.tsv")


def config(workload: str) -> spec.RunConfig:
    return spec.parse(f"""
name = "t"
run_time_s = 3
warmup_s = 1
cooldown_s = 0.5
[workload]
{workload}
""").points[0].config


def argv(c: spec.RunConfig) -> list[str]:
    return loadgen.run_argv(c, "h", 1, test_time=3, warmup=1, cooldown=0, seed=1,
                            json_out=Path("o.json"))


def test_a_preset_is_passed_and_defaulted_fields_left_to_it():
    a = argv(config('preset = "fb-etc"'))
    assert a[a.index("--workload") + 1] == "fb-etc"
    for option in ("--ratio", "--data-size", "--key-pattern", "--zipf-exponent"):
        assert option not in a, option
    pop = loadgen.populate_argv(config('preset = "fb-etc"'), "h", 1, Path("p.json"))
    assert pop[pop.index("--workload") + 1] == "fb-etc", "the populate writes the preset's sizes"


def test_the_populate_sizes_keys_with_the_runs_seed():
    # fb_key draws each key's size from the seed: another seed writes other keys.
    pop = loadgen.populate_argv(config('preset = "fb-etc"'), "h", 1, Path("p.json"), seed=6381)
    assert pop[pop.index("--seed") + 1] == "6381"


def test_a_trace_is_replayed_at_its_speed():
    a = argv(config('trace = "experiments/traces/synthetic.csv"\ntrace_speed = 4'))
    assert Path(a[a.index("--trace") + 1]).is_absolute()
    assert a[a.index("--trace-speed") + 1] == "4"


def test_the_files_other_workload_fields_override_the_preset():
    a = argv(config('preset = "twitter-cluster4"\nratio = "1:5"\ndata_size = 100\n'
                    'key_pattern = "zipf"\nzipf_exponent = 0.7'))
    assert a[a.index("--ratio") + 1] == "1:5"
    assert a[a.index("--data-size") + 1] == "100"
    assert a[a.index("--key-pattern") + 1] == "Z:Z"
    assert a[a.index("--zipf-exponent") + 1] == "0.7"
    plain = argv(config(""))
    assert "--workload" not in plain and "--ratio" in plain and "--data-size" in plain


def test_an_unknown_preset_names_the_field():
    with pytest.raises(UserError, match=r"^workload.preset: no preset 'fb_etc'"):
        config('preset = "fb_etc"')


def test_the_preset_names_are_the_load_generators():
    clusters = [line.split("\t")[0] for line in TWITTER_TABLE.read_text().splitlines()
                if line and not line.startswith("#")]
    expected = ("fb-etc", "meta-memcache-reg", *(f"twitter-{c}" for c in clusters))
    assert expected == presets.PRESETS


def huge(extra: str = "") -> str:
    levels = ", ".join(str(n) for n in range(1, 201))
    return f"""
name = "huge"
run_time_s = 60
[sweep]
{extra}
[sweep.factors]
"load.clients" = [{levels}]
"middleware.workers" = [{levels}]
"workload.data_size" = [{levels}]
"""


def test_a_sweep_of_millions_of_points_is_refused_at_once_with_its_size():
    started = time.monotonic()
    with pytest.raises(UserError) as caught:
        spec.parse(huge())
    assert time.monotonic() - started < 1.0
    assert str(caught.value) == (
        "sweep: 8,000,000 points x 3 repetitions = 24,000,000 runs, at least 16,667 days at "
        "60 s a run; over sweep.max_points (2,000): use fewer levels, or set "
        "sweep.max_points = 8000000 to run them")


def test_a_sweep_counts_its_points_without_expanding_them():
    assert sweep.count({}) == 1
    assert sweep.count({"factors": {"load": {"clients": [1, 2, 3]}, "a.b": [1, 2]}}) == 6
    assert sweep.count({"points": [{}, {}], "factors": {"x": [1, 2]}}) == 4
    with pytest.raises(UserError, match=r"^sweep.max_points: must be a whole number >= 1"):
        spec.parse(huge("max_points = 0"))
    with pytest.raises(UserError, match=r"over sweep.max_points \(100\)"):
        spec.parse('name = "t"\n[sweep]\nmax_points = 100\n[sweep.factors]\n'
                   f'"load.clients" = [{", ".join(str(n) for n in range(1, 102))}]\n')
