"""The report's findings (report/findings.py) on hand-made inputs: each rule by its test."""

import html
import re
from types import SimpleNamespace

import pytest

from cachelab.analysis import laws, linkbound, middleware_model, qos
from cachelab.readers.proxy_stats import Welford
from cachelab.report import environment, findings, study
from cachelab.report.data import Curve, LawRow, PointResult, QosRow
from cachelab.report.measure import MiddlewareTotals, ServerTotals
from cachelab.report.models import QueueingPoint
from cachelab.run import validate
from cachelab.store import (
    CapacityRecord,
    ClientClock,
    ClientTiming,
    LateRun,
    RunCheck,
    StoredCapacity,
)

STABLE = validate.Verdict(2, (0, 1), 0.01, True, False, "stable")
CONFIG = {"middleware": {"workers": 8, "pipeline": 1}, "servers": {"threads": 1},
          "load": {"mode": "closed", "pipeline": 1}}


def point(index=0, *, throughput=1000.0, verdict=STABLE, factors=None, **kw):
    return PointResult(index=index, label="raw", clients=4,
                       factors=factors or {"middleware.workers": 8, "load.clients": 4},
                       config=CONFIG, runs=2, steady_runs=2, verdict=verdict,
                       throughput=throughput, response_ms=4.0, **kw)


def middleware(throughput, service_us, server_us=100.0, queue=0.0):
    def w(mean):
        return Welford(1000, mean, 0.0)
    return MiddlewareTotals(1, throughput, throughput, 1000,
                            {"worker_service": w(service_us)}, queue, queue,
                            (ServerTotals(1000, w(server_us)),))


def qos_row(name, throughput, load=4.0):
    result = None if throughput is None else qos.QosResult(
        load, throughput, 0.5, qos.Point(load, throughput, 0.5))
    return QosRow(f"raw {name}", result, name)


def test_the_best_configuration_carries_the_most_within_the_target():
    found = findings.capacities([qos_row("8 workers", 5000.0), qos_row("32 workers", 9000.0),
                                 qos_row("1 worker", None)])
    assert [c.throughput for c in found] == [5000.0, 9000.0, None]
    best = findings.best(found)
    assert best is not None and (best.name, best.raw) == ("32 workers", "raw 32 workers")


def test_the_best_configuration_on_an_unstable_point_says_so():
    shaky = point(3, verdict=validate.Verdict(4, (0,), None, False, False, "CV 47%"))
    row = qos_row("8 workers", 9000.0)
    found = findings.capacities([QosRow(row.curve, row.result, row.name, "1", shaky),
                                 qos_row("32 workers", 5000.0)])
    best = findings.best(found)
    assert best is not None and best.unstable is shaky and found[1].unstable is None
    f = findings.Findings(found, best, [], [], [], [], [], [], None)
    assert "(at clients = 1, p99 0.5 ms; that point is unstable" in render(f)


def test_no_best_configuration_when_none_meets_the_target():
    assert findings.best(findings.capacities([qos_row("a", None)])) is None


def test_a_capacity_search_answers_with_the_rate_every_repetition_carried():
    def search(capacity):
        return CapacityRecord((), capacity, 100.0, 0.9, 99.0, 1.0, "bracketed", False)
    searches = [StoredCapacity(0, "raw", 1, search(8000.0)),
                StoredCapacity(0, "raw", 2, search(7000.0))]
    (found,) = findings.searched(searches, {0: "Redis"})
    assert (found.name, found.throughput) == ("Redis", 7000.0)


def test_the_bottleneck_is_the_busiest_resource_by_the_utilisation_law():
    # Workers: X S / m = 8,000/s x 900 µs / 8 = 0.9; server: 8,000 x 1 x 50 µs = 0.4;
    # the host's CPUs 60% busy.
    p = point(throughput=8000.0, middleware=middleware(8000.0, 900.0, server_us=50.0),
              cpu={"idle": 40.0})
    b = findings.bottleneck(Curve("raw", (point(throughput=10.0), p), (1.0, 4.0),
                                  (("middleware.workers", 8),)))
    assert b.point is p and b.configuration == "8 workers"
    assert b.busiest is not None and b.busiest.resource == "the middleware's workers"
    assert b.busiest.utilisation == pytest.approx(0.9) and b.saturated
    assert b.next is not None and b.next.resource == "this machine's CPUs"
    assert "8,000/s x 900 µs / 8" in b.busiest.how


def test_a_scale_models_workers_are_shown_in_its_own_time():
    # k = 4: the points table shows 8,000 ops/s at full speed; the middleware measured
    # 2,000/s and 4,000 µs, the same U = 1.0.
    p = point(throughput=8000.0, middleware=middleware(2000.0, 4000.0), scale=4.0)
    (workers, _) = findings.loads(p)
    assert workers.utilisation == pytest.approx(1.0)
    assert "2,000/s x 4,000 µs / 8 in the scale model's time (k = 4)" in workers.how


def test_a_servers_occupancy_ranks_after_every_true_utilisation():
    # Server: X V S = 8,000 x 1 x 300 µs = 2.4 requests there (round trip included), yet
    # the machine's CPUs, at 100%, are what limits.
    p = point(throughput=8000.0, middleware=middleware(8000.0, 400.0, server_us=300.0),
              cpu={"idle": 0.0})
    found = findings.loads(p)
    assert [x.resource for x in found] == ["this machine's CPUs", "the middleware's workers",
                                           "server 1"]
    assert found[-1].occupancy and found[-1].utilisation == pytest.approx(2.4)


def test_along_a_factor_that_is_no_load_the_bottleneck_is_at_the_busiest_point():
    # x = the sets:gets ratio: the last point (write-only) is no higher load; the busiest
    # is the read-only point, which carried more.
    reads = point(0, throughput=9000.0, middleware=middleware(9000.0, 800.0))
    writes = point(1, throughput=2000.0, middleware=middleware(2000.0, 3000.0))
    c = Curve("raw", (reads, writes), (0.0, 1.0), (("middleware.workers", 8),))
    assert findings.bottleneck(c, by_load=False).point is reads
    assert findings.bottleneck(c).point is writes  # along clients: the last is the highest


def test_nothing_is_saturated_below_the_threshold():
    p = point(throughput=1000.0, middleware=middleware(1000.0, 100.0))
    b = findings.bottleneck(Curve("raw", (p,), (4.0,)))
    assert b.busiest is not None and b.busiest.utilisation < findings.SATURATED
    assert not b.saturated


def test_a_link_an_emulated_hosts_quota_and_the_load_generators_count_too():
    p = point(throughput=900.0, link_bound=linkbound.Bound(1000.0, "server-1 egress"),
              host_cpu={"server-1": (20.0, 10.0), "load-1": (50.0, 0.0)},
              clocks=(ClientClock(0, "load", "intended->kernel_rx", True, None, 0.95),))
    loads = findings.loads(p, quotas={"server-1": 0.5})
    assert [(x.resource, round(x.utilisation, 2)) for x in loads] == [
        ("the load generators", 0.95), ("the link (server-1 egress)", 0.9),
        ("host server-1's CPU quota", 0.6)]


def test_every_utilisation_the_findings_name_is_in_a_table():
    # The findings may name "the load generators" at 95% (above): the utilisation table
    # lists every point's resources, and the clients' timings table the busiest thread.
    p = point(timings=(ClientTiming(0, "load", "wire", "kernel", 0.1, 0.9, 1),),
              clocks=(ClientClock(0, "load", "intended->kernel_rx", True, None, 0.95),))
    f = findings.build(qos=[], curves=[Curve("raw", (p,), (4.0,))], queueing=[], mva=[],
                       points=[p], late=[], checks=[], searches=[], laws=[], study=None)
    (load,) = f.utilisation[0][1]
    page = environment().get_template("time.html.j2").render(
        figures={"time": []}, d=SimpleNamespace(points=[p], finished=True),
        stages=("network",), f=f)
    assert load.resource == "the load generators" and load.utilisation == 0.95
    assert '<td>the load generators</td>\n<td class="n">0.95</td>' in page
    assert "<th>busiest thread</th>" in page and '<td class="n">95%</td></tr>' in page


def row(model, measured_s, predicted_s, assumptions=()):
    c = middleware_model.Compared(measured_s, predicted_s)
    return middleware_model.ModelRow(model, 1.0, 1.0, 1, 0.5, 0.5, c, c, c,
                                     tuple(assumptions))


def test_a_model_fits_where_predicted_over_measured_is_within_the_band():
    a, b = point(0), point(1)
    rows = [QueueingPoint("c", 1.0, a, None, row("M/M/1", 1.0, 3.0, ["closed loop"]),
                          row("M/M/m", 1.0, 1.2)),
            QueueingPoint("c", 4.0, b, None, row("M/M/1", 1.0, 1.1),
                          row("M/M/m", 1.0, 0.9))]
    mm1, mmm = findings.queueing_fits(rows)
    assert (mm1.model, mm1.fits, len(mm1.ratios)) == ("M/M/1", 1, 2)
    assert mm1.worst is a and mm1.worst_ratio == 3.0 and mm1.broken == ("closed loop",)
    assert mmm.fits_all and mmm.broken == () and mmm.median == pytest.approx(1.05)


def test_a_model_without_a_steady_state_says_which_assumption_broke():
    p = point()
    rows = [QueueingPoint("c", 1.0, p, None, row("M/M/1", 1.0, None, ["rho >= 1"]),
                          row("M/M/m", 1.0, 1.0), "no sweep")]
    mm1, _ = findings.queueing_fits(rows)
    assert mm1.ratios == () and mm1.unpredicted == 1 and mm1.broken == ("rho >= 1",)
    assert not mm1.fits_all


MM1_REASON = ("no sweep over the load in this configuration (its x axis, sets:gets ratio, "
              "is not a load): mu would be the point's own throughput (rho = 1)")


def left_out_mm1(n):
    return [QueueingPoint("c", float(i), point(i), None, None, row("M/M/m", 1.0, 1.2),
                          MM1_REASON) for i in range(n)]


def test_a_model_left_out_at_every_point_is_named_with_the_reason():
    mm1, mmm = findings.queueing_fits(left_out_mm1(2))
    assert (mm1.model, mm1.applied, mm1.left_out) == ("M/M/1", False,
                                                      f"at all 2 points: {MM1_REASON}")
    assert mmm.model == "M/M/m" and mmm.applied and mmm.left_out is None


def test_a_model_left_out_at_some_points_says_how_many_and_why():
    rows = left_out_mm1(1) + [QueueingPoint("d", 4.0, point(1), None,
                                            row("M/M/1", 1.0, 1.1), row("M/M/m", 1.0, 0.9))]
    mm1, _ = findings.queueing_fits(rows)
    assert mm1.applied and mm1.fits_all
    assert mm1.left_out == f"at 1 of 2 points: {MM1_REASON}"


def test_the_network_of_queues_left_out_everywhere_says_why():
    note = "the network of queues needs a closed-loop sweep over clients"
    (mva,) = findings.mva_fits([], note, configurations=8)
    assert (mva.model, mva.applied, mva.left_out) == ("MVA", False,
                                                      f"at every configuration: {note}")
    assert findings.mva_fits([]) == []


def render(f):
    """The findings section's text as a reader sees it (no tags, no hover titles)."""
    page = environment().get_template("findings.html.j2").render(
        d=SimpleNamespace(settings={"qos_target_ms": 1.0}, finished=True),
        sec=SimpleNamespace(mva_note=None), saturated=findings.SATURATED, fit=findings.FIT,
        f=f)
    text = re.sub(r"<[^>]+>", " ", re.sub(r'title="[^"]*"', "", page))
    return re.sub(r"\s+", " ", html.unescape(text))


def ratio_findings(x_path):
    reads = point(0, throughput=9000.0, factors={"workload.ratio": "0:1"},
                  middleware=middleware(9000.0, 900.0))
    writes = point(1, throughput=2000.0, factors={"workload.ratio": "1:0"},
                   middleware=middleware(2000.0, 100.0))
    c = Curve("middleware.workers=8", (reads, writes), (0.0, 1.0),
              (("middleware.workers", 8),))
    return findings.build(
        qos=[QosRow(c.label, qos.QosResult(0.0, 9000.0, 0.5, qos.Point(0.0, 9000.0, 0.5)),
                    c.name, "read-only")],
        curves=[c], queueing=left_out_mm1(2), mva=[], points=[reads, writes], late=[],
        checks=[], searches=[], laws=[], study=None, x_path=x_path,
        mva_note="the network of queues needs a closed-loop sweep over clients; this "
                 "report's x axis, sets:gets ratio, is not clients")


def test_findings_along_a_factor_that_is_no_load_never_speak_of_the_highest_load():
    f = ratio_findings("workload.ratio")
    assert not f.load_axis and f.x_name == "sets:gets ratio"
    assert f.bottlenecks[0].point.index == 0  # read-only carried the most
    text = render(f)
    assert "highest load" not in text and "workload.ratio" not in text
    assert "Bottleneck at the busiest point" in text
    assert "by 8 workers (at read-only, p99 0.5 ms)" in text
    assert "at sets:gets ratio" in text  # the capacity column's header


def test_the_models_paragraph_names_each_model_left_out_and_why():
    text = render(ratio_findings("workload.ratio"))
    assert f"M/M/1: left out at all 2 points: {MM1_REASON}." in text
    assert ("MVA: left out at every configuration: the network of queues needs a "
            "closed-loop sweep over clients; this report's x axis, sets:gets ratio, is not "
            "clients.") in text


def test_findings_along_clients_speak_of_the_highest_load():
    f = ratio_findings("clients")
    assert f.load_axis and f.bottlenecks[0].point.index == 1
    assert "Bottleneck at the highest load" in render(f)


def test_what_not_to_trust_links_each_doubt_to_its_detail():
    unstable = point(2, verdict=validate.Verdict(3, (0,), 0.4, False, False, "CV 40%"))
    behind = point(3, fell_behind_runs=2)
    late = [LateRun(1, "raw", 1, 0.5, 1.0), LateRun(1, "raw", 2, 0.7, 1.0)]
    checks = [RunCheck(0, "raw", 1, "machine", False, None, None, "busy"),
              RunCheck(0, "raw", 2, "machine", False, None, None, "busy"),
              RunCheck(1, "raw", 1, "machine", True, None, None, "")]
    law = laws.check_interactive_law([(4, 1.0, 5.0)])[0]   # R 5 ms against N / X = 4 ms
    found = findings.doubts([point(1), unstable, behind], late, checks, [],
                            [LawRow(point(1), law)])
    assert [(d.link, d.what) for d in found] == [
        ("point-3", "8 workers, 4 clients: unstable (CV 40%)"),
        ("point-4", "8 workers, 4 clients: the load generator fell behind its open-loop "
                    "schedule in 2 run(s)"),
        ("late", "8 workers, 4 clients: the load generator sent late in 2 run(s) (p99 "
                 "send lag 0.7 ms of a 1 ms p99)"),
        ("checks", "2 of 3 runs: this machine, not the emulated system, was the limit"),
        ("law", "1 point(s) break the interactive law by more than 10% (worst 8 workers, "
                "4 clients: +25%)")]


def test_many_unstable_points_are_one_doubt_linked_to_their_list():
    shaky = validate.Verdict(3, (0,), 0.4, False, False, "CV 40%")
    points = [point(i, verdict=shaky) for i in range(findings.LISTED + 1)] + [point(9)]
    (found,) = findings.doubts(points, [], [], [], [])
    assert (found.link, found.what) == ("unstable", "5 of 6 points stayed unstable (their "
                                        "runs' throughput varied more than the threshold)")


def test_nothing_to_distrust_in_a_clean_experiment():
    assert findings.doubts([point()], [], [], [], []) == []


def test_the_studys_allocation_of_variation_sits_beside_ours_error_last():
    rows = (study.EffectRow("error", "error", 0.0, 1.5, None, None),
            study.EffectRow("S", "A", 95.5, 98.4, 2692.0, 2500.0),
            study.EffectRow("W", "B", 0.8, 0.2, 239.0, -10.0))
    cmp = study.StudyComparison("the study", (
        study.EffectsComparison("Table 4", "throughput", "read-only", rows),
        study.EffectsComparison("Table 2", "throughput", None, (), "no design")), ())
    columns, found = findings.study_rows(cmp)
    assert columns == ["S", "W", "error"]
    assert found[0].shares["S"] == (95.5, 98.4) and (found[0].same_signs, found[0].signs) \
        == (1, 2)
    assert found[1].note == "no design"
    assert findings.study_rows(None) == ([], [])
