"""Issue 24's harness side: the load generator's timing and CPU read and stored, intervals
on every run's and point's percentiles, the per-run self-checks, the series aligned over
the instances' common window, `validation.stop_when`, and the clock-offset probe. With
real load-generator reports and synthetic executors instead of processes."""

import dataclasses
import io
import threading
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from cachelab import store
from cachelab.errors import UserError
from cachelab.hosts import echo
from cachelab.hosts.hostinfo import HostInfo
from cachelab.readers import hdr, loadgen, selfcheck
from cachelab.run import validate
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec

DATA = Path(__file__).parent / "data"
#: cachelab-load --rate 2000 --test-time 2 --start-at ... (kernel timestamps), memcached.
TIMED = DATA / "load-report-timing.json"
#: The same generator before timing and client_cpu existed.
OLD = DATA / "load-report.json"


def encoded(values_us) -> str:
    h = HdrHistogram(1, 60_000_000, 3)
    for v in values_us:
        h.record_value(int(v))
    return h.encode().decode()


def with_series(report: loadgen.Report, latencies: list[float], start_ms: int | None = None,
                busiest: float | None = None) -> loadgen.Report:
    """`report` with one `get` row per second (100 requests each, the given mean latency),
    started at `start_ms`, and its busiest load thread at `busiest` of a CPU."""
    rows = [loadgen.SecondRow(i, "get", 100, 100, 0, 0, ms, ms) for i, ms in
            enumerate(latencies)]
    cpu = report.client_cpu
    if busiest is not None:
        cpu = loadgen.ClientCpu(1, 1.0, 0.1, 2.0, busiest, busiest, busiest > 0.85)
    return dataclasses.replace(report, series=rows, client_cpu=cpu,
                               started_unix_ms=start_ms or report.started_unix_ms)


def test_timing_and_client_cpu_are_read_with_the_clock_each_figure_uses():
    r = loadgen.load(TIMED)
    t = r.timing
    assert t is not None and t.kernel and t.latency_clock == "intended->kernel_rx"
    assert t.figures["wire"].clock == "kernel_tx->kernel_rx"
    assert t.figures["user_latency"].clock == "intended->user_read"
    assert set(t.figures) == set(loadgen.TIMING_FIGURES)
    # user latency = send delay + wire + read delay, request by request: so in the mean
    f = {k: v.latency_ms["avg"] for k, v in t.figures.items()}
    assert f["user_latency"] == pytest.approx(f["send_delay"] + f["wire"] + f["read_delay"],
                                              rel=0.02)
    assert r.client_cpu is not None and not r.client_cpu.saturated
    assert r.start_late_us is not None and r.start_late_us >= 0
    old = loadgen.load(OLD)  # a report from before: read, with nothing made up
    assert old.timing is None and old.client_cpu is None and old.start_late_us is None


def test_run_and_measure_argv_carry_the_common_start_instant():
    c = spec.parse('name = "t"\nrun_time_s = 3\nwarmup_s = 1\ncooldown_s = 0\n'
                   '[load]\nmeasure_rate = 200\n').points[0].config
    kw = dict(test_time=3, warmup=1, cooldown=0, json_out=Path("/x.json"),
              start_at_ms=1795549377041)
    load = loadgen.run_argv(c, "h", 1, seed=1, **kw)
    measure = loadgen.measure_argv(c, "h", 1, rate=200, seed=2, **kw)
    assert "--start-at=1795549377041" in load and "--start-at=1795549377041" in measure
    joined = " ".join(measure)
    assert "--threads 1 --clients 1" in joined and "--rate 200" in joined
    assert "--start-at" not in " ".join(loadgen.run_argv(c, "h", 1, test_time=3, warmup=1,
                                                         cooldown=0, seed=1,
                                                         json_out=Path("/x.json")))


def test_intervals_bracket_the_percentiles_the_tools_report():
    r = loadgen.load(TIMED)
    found = {i.name: i for i in selfcheck.intervals([r.histograms["total"]])}
    assert list(found) == ["p50", "p90", "p99", "p999"]
    merged = hdr.decode(r.histograms["total"])
    for name, q in selfcheck.PERCENTILES.items():
        i = found[name]
        assert i.estimate_ms == merged.quantile(q) / 1000  # the run's own p99, exactly
        assert i.low_ms <= i.estimate_ms <= i.high_ms and i.samples == merged.total
    assert found["p999"].width_ms > found["p50"].width_ms  # ~4,000 samples: a thin tail
    assert selfcheck.intervals([]) == ()


def test_series_are_aligned_on_wall_clock_seconds_over_the_common_window():
    base = loadgen.load(TIMED)
    a = with_series(base, [1.0] * 6, start_ms=10_000)
    b = with_series(base, [3.0] * 6, start_ms=12_000)  # started 2 s later
    seconds = selfcheck.aligned([a, b])
    assert sorted(seconds) == [2, 3, 4, 5]  # only where both ran
    assert {s.ops for s in seconds.values()} == {200}
    assert {s.latency_ms for s in seconds.values()} == {2.0}
    # b's host clock runs 2 s ahead: it really started with a, so all six seconds are common
    assert sorted(selfcheck.aligned([a, b], [0.0, 2.0])) == [0, 1, 2, 3, 4, 5]


def test_a_drifting_run_fails_stationarity_and_a_saturated_closed_loop_is_flagged():
    base = loadgen.load(TIMED)
    rng = np.random.default_rng(7)
    steady = with_series(base, list(1 + 0.05 * rng.standard_normal(20)), busiest=0.3)
    drifting = with_series(base, [1 + 0.1 * i for i in range(20)], busiest=0.95)
    window = dict(run_time=20, warmup=0, cooldown=0)
    ok = {k.name: k for k in selfcheck.checks([steady], mode="closed", **window)}
    assert [k.passed for k in ok.values()] == [True, True, True]
    bad = {k.name: k for k in selfcheck.checks([drifting], mode="closed", **window)}
    assert not bad["stationarity"].passed and "drifts" in bad["stationarity"].reason
    assert not bad["client CPU"].passed and "95%" in bad["client CPU"].reason
    # open loop: no CPU verdict (the schedule, not the client, sets the rate); too few
    # steady seconds: no series checks
    assert [k.name for k in selfcheck.checks([drifting], mode="open", **window)] == [
        "independence", "stationarity"]
    assert selfcheck.checks([drifting], mode="open", run_time=20, warmup=0,
                            cooldown=17) == ()


def test_stop_when_repeats_until_the_p99_interval_is_narrow_enough():
    rng = np.random.default_rng(1)
    # 1,000 samples per run from an exponential tail: the p99 interval narrows with runs
    runs = [validate.RunOutcome(100.0, 0.01, (encoded(1000 + rng.exponential(500, 1000)),))
            for _ in range(8)]
    widths = [validate.p99_interval(runs[:n]).width_ms for n in (1, 4, 8)]
    assert widths[0] > widths[1] > widths[2]
    kw = dict(threshold=0.05, repetitions=1, max_repetitions=8)
    wide = validate.assess(runs[:1], stop_width_ms=widths[1] * 1.01, **kw)
    assert wide.more and not wide.stable and "p99 interval" in wide.reason
    assert validate.assess(runs[:4], stop_width_ms=widths[1] * 1.01, **kw).stable
    bounded = validate.assess(runs[:8], stop_width_ms=1e-6, **kw)
    assert not bounded.more and "(the bound)" in bounded.reason


@pytest.mark.parametrize("body, expected", [
    ("[validation]\nstop_when = 3\n", "validation.stop_when: must be a table"),
    ("[validation.stop_when]\np99_width_ms = 0\n",
     "validation.stop_when.p99_width_ms: must be > 0, got 0"),
    ("[validation.stop_when]\np99_wdth_ms = 1\n",
     "validation.stop_when.p99_wdth_ms: unknown field"),
    ("[load]\nmode = \"capacity\"\nmeasure_rate = 100\n", "load.measure_rate: not with"),
])
def test_stop_when_and_measure_rate_mistakes_name_the_field(body, expected):
    head = 'name = "t"\nrun_time_s = 3\nwarmup_s = 1\ncooldown_s = 0\n'
    with pytest.raises(UserError) as err:
        spec.parse(head + body)
    assert expected in str(err.value)


def test_the_measuring_client_gets_a_host_of_its_own():
    from cachelab.spec import topology

    c = spec.parse('name = "t"\nrun_time_s = 3\nwarmup_s = 1\ncooldown_s = 0\n'
                   '[topology]\nkind = "netns"\n[load]\ninstances = 2\nmeasure_rate = 100\n'
                   ).points[0].config
    layout = topology.plan(c)
    assert layout.host("measure", 0).name == "measure1"
    assert ("measure1", "middleware1") in layout.pairs()
    assert {layout.host("load", i).name for i in range(2)} == {"load1", "load2"}


STOPPING = """
name = "stopping"
order = "sweep"
repetitions = 1
run_time_s = 10
warmup_s = 0
cooldown_s = 0
[validation]
cv_threshold = 0.5
max_repetitions = 6
[validation.stop_when]
p99_width_ms = {width}
[sweep.factors]
"load.clients" = [1]
"""


def timed_executor():
    base = loadgen.load(TIMED)

    def execute(exp, point, repetition, directory):
        drift = [1 + 0.1 * i for i in range(10)]
        reports = (with_series(base, drift, busiest=0.9),)
        measure = (base,)
        summary = validate.summarise(reports, run_time=10, warmup=0, cooldown=0)
        return store.RunRecord(
            point.index, repetition, 1.0, 2.0, summary, HostInfo.from_json({}), reports, (), (),
            {"load-0.json": TIMED.read_bytes(), "measure-0.json": TIMED.read_bytes()},
            measures=measure,
            placements=(store.ClientPlacement("load", 0, "load1", 3.5),
                        store.ClientPlacement("measure", 0, "measure1", -2.0)),
            start_at_unix_ms=base.started_unix_ms,
            intervals=selfcheck.intervals([base.histograms["total"]])
            + selfcheck.intervals([base.histograms["total"]], "measure"),
            checks=selfcheck.checks(reports, mode="closed", run_time=10, warmup=0,
                                    cooldown=0))

    return execute


def test_intervals_checks_and_clocks_are_stored_and_shown(tmp_path):
    from cachelab.report import write_report

    base = loadgen.load(TIMED)
    one_run = {i.name: i for i in selfcheck.intervals([base.histograms["total"]])}
    width = one_run["p99"].width_ms * 0.75  # one run is not enough, more runs narrow it
    lines = io.StringIO()
    outcome = run_experiment(spec.parse(STOPPING.format(width=width)), tmp_path,
                             progress=Progress(lines), execute=timed_executor())
    assert 1 < outcome.runs_done < 6 and outcome.unstable == ()
    first = next(line for line in lines.getvalue().splitlines() if " rep 1 [" in line
                 and "ops/s" in line)
    p99 = one_run["p99"]
    assert f"[{p99.low_ms:.3f}, {p99.high_ms:.3f}] ms" in first
    assert "(failed check: independence, stationarity, client CPU)" in first
    with store.Store.open_existing(tmp_path) as s:
        exp = s.require_experiment()
        point = s.point_intervals(exp.id)[0]
        assert set(point) == {"load", "measure"}
        assert point["load"]["p99"].samples == outcome.runs_done * one_run["p99"].samples
        assert point["load"]["p99"].high_ms - point["load"]["p99"].low_ms <= width
        run = s.run_intervals(1)["load"]["p99"]
        assert (run.low_ms, run.estimate_ms, run.high_ms) == (
            one_run["p99"].low_ms, one_run["p99"].estimate_ms, one_run["p99"].high_ms)
        failed = {(k.repetition, k.name) for k in s.run_checks(exp.id) if not k.passed}
        assert (1, "stationarity") in failed and (1, "client CPU") in failed
        clocks = s.client_clocks([1], 0)
        assert {(k.role, k.latency_clock, k.kernel) for k in clocks} == {
            ("load", "intended->kernel_rx", True), ("measure", "intended->kernel_rx", True)}
        offsets = s.conn.execute("SELECT role, host, clock_offset_us FROM client_instance "
                                 "WHERE run_id = 1 ORDER BY role").fetchall()
        assert [tuple(r) for r in offsets] == [("load", "load1", 3.5),
                                               ("measure", "measure1", -2.0)]
        assert s.conn.execute("SELECT start_at_unix_ms FROM run WHERE id = 1"
                              ).fetchone()[0] == base.started_unix_ms
    html = write_report(tmp_path).read_text()
    assert "order statistics" in html and "intended-&gt;kernel_rx" in html
    assert "failed a self-check" in html and "the run drifts" in html
    assert "the throughput may be the client&#39;s" in html
    assert '<figure id="fig-percentiles-measured">' in html and "p99_width_ms" in html


def test_the_clock_probe_finds_no_offset_against_itself():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = threading.Thread(target=echo.clock, args=("127.0.0.1", port), daemon=True)
    server.start()
    offset_us, rtt_us = echo.offset("127.0.0.1", port, 20)
    server.join(5)
    assert 0 < rtt_us < 50_000
    assert abs(offset_us) <= rtt_us / 2 + 50  # one clock: only the probe's own error


def test_every_percentile_plot_draws_the_intervals_as_error_bars():
    from matplotlib.figure import Figure

    from cachelab.report import data, plots, plots_analysis

    def point(i: int, p99: tuple[float, float, float]) -> data.PointResult:
        named = {n: store.StoredInterval("load", n, q, est, lo, hi, 0.95, 1000)
                 for n, q, (lo, est, hi) in (("p50", 0.5, (0.9, 1.0, 1.1)),
                                             ("p90", 0.9, (1.8, 2.0, 2.1)),
                                             ("p99", 0.99, p99))}
        return data.PointResult(index=i, label=str(i), factors={}, config={}, clients=i + 1,
                                runs=1, steady_runs=1, verdict=None, throughput=100.0 * (i + 1),
                                percentiles_ms={"p50": 9.0, "p90": 9.0, "p99": 9.0},
                                intervals={"load": named})

    curve = data.Curve("c", (point(0, (4.0, 5.0, 7.0)), point(1, (5.5, 6.0, 6.5))), (1.0, 2.0))
    for draw in (lambda ax: plots.plot_percentiles(ax, [curve], 10.0, "clients"),
                 lambda ax: plots_analysis.plot_latency_throughput(ax, [curve], 10.0)):
        ax = Figure().add_subplot()
        draw(ax)
        spans = sorted(tuple(np.round(seg[:, 1], 6)) for c in ax.containers
                       for seg in c.lines[2][0].get_segments())
        # the p99 bars span each point's interval, not the mean over runs (9.0)
        assert (4.0, 7.0) in spans and (5.5, 6.5) in spans and (0.9, 1.1) in spans


def test_poisson_sends_pass_the_arrival_check_and_bunched_sends_fail_it():
    base = loadgen.load(TIMED)
    assert base.configuration.get("arrival") == "poisson"
    rng = np.random.default_rng(11)
    steady = with_series(base, list(1 + 0.05 * rng.standard_normal(20)))
    window = dict(run_time=20, warmup=0, cooldown=0)
    poisson = dataclasses.replace(
        steady, send_intervals_ns=tuple(int(g) for g in rng.exponential(500_000, 5000)))
    fixed = dataclasses.replace(
        steady, send_intervals_ns=tuple(500_000 + int(g) for g in rng.normal(0, 500, 5000)))
    ok = {k.name: k for k in selfcheck.checks([poisson], mode="open", **window)}
    assert ok["arrivals"].passed
    bad = {k.name: k for k in selfcheck.checks([poisson, fixed], mode="open", **window)}
    assert not bad["arrivals"].passed and "not exponential" in bad["arrivals"].reason
    # a fixed-interval schedule, or too few gaps, is not tested
    evenly = dataclasses.replace(fixed, configuration={**fixed.configuration,
                                                       "arrival": "fixed"})
    short = dataclasses.replace(poisson, send_intervals_ns=poisson.send_intervals_ns[:10])
    for report in (evenly, short):
        names = [k.name for k in selfcheck.checks([report], mode="open", **window)]
        assert "arrivals" not in names
