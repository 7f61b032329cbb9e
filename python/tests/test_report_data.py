"""The report's grouping of points into curves and its choice of x axis (pure)."""

import dataclasses

from cachelab.report import data, sections
from cachelab.run import validate


def point(index, factors, clients, throughput=100.0, p99=0.5, mode="closed"):
    verdict = validate.Verdict(2, (0, 1), 0.01, True, False, "stable")
    return data.PointResult(index=index, label=str(factors), factors=factors,
                            config={"load": {"mode": mode, "pipeline": 1}}, clients=clients,
                            runs=2, steady_runs=2, verdict=verdict, throughput=throughput,
                            throughput_std=1.0, response_ms=clients / throughput * 1000,
                            response_std=0.0, percentiles_ms={"p50": 0.1, "p90": 0.2,
                                                              "p99": p99})


def report(points, factors, report_x=None):
    settings = {"factors": factors, "report_x": report_x, "qos_target_ms": 1.0}
    return data.ReportData("x", "", "", settings, tuple(points), None, 2, 4)


def test_clients_on_x_and_one_curve_per_other_factor():
    pts = [point(i, {"middleware.workers": w, "load.clients": c}, c, throughput=100 * c,
                 p99=c / 4) for i, (w, c) in enumerate([(8, 4), (8, 1), (32, 1), (32, 4)])]
    pts.append(data.PointResult(index=4, label="not run", factors={"middleware.workers": 64,
                                "load.clients": 1}, config={}, clients=1, runs=0,
                                steady_runs=0, verdict=None))
    d = report(pts, ["middleware.workers", "load.clients"])
    assert data.x_axis(d)[0] == "clients"
    found, ticks = data.curves(d)
    assert ticks is None
    assert [(c.label, c.x) for c in found] == [("middleware.workers=8", (1.0, 4.0)),
                                               ("middleware.workers=32", (1.0, 4.0))]
    qos = data.qos_rows(found, 1.0)
    assert [r.result.throughput for r in qos] == [400, 400]  # p99 = 1.0 at 4 clients
    assert [r.at for r in qos] == ["4", "4"]
    laws = data.interactive_rows(d)
    assert len(laws) == 4 and all(abs(r.check.error) < 1e-9 for r in laws)
    assert not d.finished


def test_a_text_factor_is_categorical_and_rate_wins_in_open_loop():
    pts = [point(0, {"servers.kind": "memcached"}, 1), point(1, {"servers.kind": "redis"}, 1)]
    found, ticks = data.curves(report(pts, ["servers.kind"]))
    assert ticks == ["memcached", "redis"] and found[0].x == (0.0, 1.0)
    d = report([point(0, {"servers.kind": "redis", "load.rate": 1000.0}, 1, mode="open")],
               ["servers.kind", "load.rate"])
    assert data.x_axis(d)[0] == "load.rate"
    assert data.interactive_rows(d) == []  # the law is for closed loops
    assert data.x_axis(report(pts, ["servers.kind"], "servers.kind"))[0] == "servers.kind"


def test_an_axis_spanning_two_decades_is_logarithmic():
    def curve(*xs):
        return data.Curve("c", (), tuple(float(x) for x in xs))

    assert data.log_x([curve(2, 64, 1024, 524288)], None)  # object sizes
    assert data.log_x([curve(1000, 5000), curve(100_000)], None)  # rates, over two curves
    assert not data.log_x([curve(1, 4, 16, 64)], None)
    assert not data.log_x([curve(0, 100, 1000)], None)  # 0 has no place on a log axis
    assert not data.log_x([curve(0, 1)], ["memcached", "redis"])


def test_workers_share_cpus_unless_pinned_apart_or_on_hosts_of_their_own():
    from cachelab.report.models import _cpuset, shares_cpus

    def local(mw, servers, load):
        return {"topology": {"kind": "local", "host": []}, "middleware": {"cpus": mw},
                "servers": {"cpus": servers}, "load": {"cpus": load}}

    assert shares_cpus(local([], [], []))
    assert shares_cpus(local([1], [0], []))  # the load generators may run anywhere
    assert not shares_cpus(local([1], [0], [0]))

    def hosts(kind, *specs):
        return {"topology": {"kind": kind, "host": [{"roles": r, "cpus": c}
                                                    for r, c in specs]}}

    assert shares_cpus(hosts("netns"))  # every host a namespace on the same CPUs
    assert shares_cpus(hosts("netns", (["middleware"], "1"), (["server"], "0-1")))
    assert not shares_cpus(hosts("netns", (["middleware"], "1"), (["server", "load"], "0")))
    assert not shares_cpus(hosts("ssh", (["middleware"], None), (["server"], None)))
    assert shares_cpus(hosts("ssh", (["middleware", "server"], None)))
    assert _cpuset("0-2,5") == (0, 1, 2, 5) and _cpuset(None) == ()


def test_per_point_plots_label_each_point_with_its_levels_as_a_reader_says_them():
    from matplotlib.figure import Figure

    from cachelab.report import plots

    shown = [point(0, {"workload.ratio": "0:1", "middleware.workers": 8}, 1),
             point(1, {"workload.ratio": "1:0", "middleware.sharded": True}, 1)]
    ax = Figure().add_subplot()
    plots.point_axis(ax, shown)
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "read-only\n8 workers\n-", "write-only\n-\nsharded"]
    assert ax.get_xlabel() == "point"
    cpu = {s: 10.0 for s in plots.CPU_STACK}
    ax = Figure().add_subplot()
    plots.plot_cpu(ax, [dataclasses.replace(point(0, {}, 1), cpu=cpu)])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["base"]  # a one-point experiment
    assert ax.get_xlabel() == "point"


def test_an_axis_that_is_no_load_reads_by_its_reader_names():
    # The sets:gets ratio on x: the axis, the ticks and the QoS table's "at" read as a
    # reader says them; the raw path stays the axis's key.
    pts = [point(0, {"workload.ratio": "0:1"}, 4, throughput=900.0),
           point(1, {"workload.ratio": "1:0"}, 4, throughput=300.0)]
    d = report(pts, ["workload.ratio"])
    assert data.x_axis(d) == ("workload.ratio", "sets:gets ratio")
    found, ticks = data.curves(d)
    assert [data.x_level("workload.ratio", x, ticks) for x in found[0].x] == [
        "read-only", "write-only"]
    (row,) = data.qos_rows(found, 1.0, "workload.ratio", ticks)
    assert row.result is not None and row.result.throughput == 900.0
    assert row.at == "read-only"
    assert data.x_level("load.rate", 20000.0, None) == "20,000"


def test_the_analysiss_notes_name_factors_as_a_reader_does():
    note = "not a 2^k design: load.clients has 3 level(s) (1, 4, 16)"
    assert sections.readable_note(note, ["workload.ratio", "load.clients"]) == \
        "not a 2^k design: clients per load thread has 3 level(s) (1, 4, 16)"
