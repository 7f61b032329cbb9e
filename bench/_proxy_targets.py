"""The middleware targets `proxy_bench.py` judges over its results rows: issue 14's
against twemproxy, issue 20's and issue 34's against the floor (`bench/floor`, a bare
epoll proxy) and twemproxy. Each target is judged on the median over repetitions of the
per-repetition value (repetition i of one configuration against repetition i of the
other), with the min-max spread beside it; only one-backend rows count."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from _targets import AT_LEAST, AT_MOST, differences, judge, ratios

OPEN_RATES = (20_000, 40_000)  # requests/s in total, open loop
FLOOR = "floor"  # cachelab-floor's name in the results


@dataclass(frozen=True)
class Case:
    backends: int
    value: int
    mix: str  # "get" or "1:1"
    loop: str  # "closed" or "open"
    rate: int | None = None  # requests/s in total, open loop only

    def label(self) -> str:
        loop = "closed" if self.rate is None else f"open {self.rate // 1000}k/s"
        return f"{self.value} B, {self.mix}, {loop}"



def per_rep(row: dict, name: str, field: str) -> list[float | None]:
    """A field of every repetition of one configuration, in run order."""
    return [r[field] for r in row[name]["repetitions"]]


def steals(row: dict, *names: str) -> list[float]:
    return [s for n in names for s in per_rep(row, n, "steal")]


def cpu_ratio(row: dict, a: str, b: str) -> list[float | None]:
    """a's CPU per request over b's, per repetition."""
    return ratios(per_rep(row, a, "proxy_cpu_s_per_100k"),
                  per_rep(row, b, "proxy_cpu_s_per_100k"))


# Issue 14's middleware targets, as printed above their lines.
TITLES = {
    "T1a": "T1a production CPU per request <= 0.80x twemproxy's, open loop",
    "T1b": "T1b production closed-loop requests per proxy CPU-second >= 1.25x twemproxy's",
    "T1c": "T1c production open-loop p99 added over direct memcached <= 50 us at "
           f"{OPEN_RATES[0]:,}/s",
    "T2": "T2  default (W=64) CPU per request <= 1.00x twemproxy's, every loop",
}


def issue14_targets(results: list[dict]) -> list:
    """Issue 14's middleware targets over the one-backend rows (see the module docstring)."""
    one = [(Case(**r["case"]), r) for r in results if r["case"]["backends"] == 1]
    prod, default, tw = "cachelab-production", "cachelab-default", "twemproxy"
    spin = "cachelab-busy-poll"

    def floor_note(r: dict, a: str, b: str) -> str:
        """cpu_ratio with cachelab-floor, the bare epoll proxy, as a or b (empty without it)."""
        return f"floor {fmt_median(cpu_ratio(r, a, b))}" if FLOOR in r else ""

    def added_p99(r: dict, name: str) -> list[float | None]:
        return differences(per_rep(r, name, "p99_ms"), per_rep(r, "direct", "p99_ms"), 1000)

    out = []
    for rate in OPEN_RATES:
        for case, r in ((c, r) for c, r in one if c.rate == rate):
            out.append(judge("T1a", case.label(), cpu_ratio(r, prod, tw), AT_MOST, 0.80,
                             steal=steals(r, prod, tw),
                             note=floor_note(r, FLOOR, tw)))
    for case, r in ((c, r) for c, r in one if c.rate is None):
        # Requests per proxy CPU-second are 1e5 / (CPU s per 100k requests), so the ratio
        # is twemproxy's CPU per request over ours.
        tput = ratios(per_rep(r, prod, "ops_per_sec"), per_rep(r, tw, "ops_per_sec"))
        floor = floor_note(r, tw, FLOOR)
        out.append(judge("T1b", case.label(), cpu_ratio(r, tw, prod), AT_LEAST, 1.25,
                         steal=steals(r, prod, tw),
                         note=f"throughput {fmt_median(tput)}" + (f"; {floor}" if floor else "")))
    for case, r in ((c, r) for c, r in one if c.rate == OPEN_RATES[0]):
        out.append(judge("T1c", case.label(), added_p99(r, prod), AT_MOST, 50, unit="us",
                         steal=steals(r, prod, "direct"),
                         note=f"twemproxy {fmt_median(added_p99(r, tw), ' us')}"))
        if spin in r:
            out.append(judge("T1c", f"{case.label()}, busy-poll", added_p99(r, spin), AT_MOST,
                             50, unit="us", steal=steals(r, spin, "direct"),
                             note=f"CPU/request {fmt_median(cpu_ratio(r, spin, tw))} "
                                  "twemproxy's"))
    for case, r in one:
        # No floor here: it multiplexes every client onto one connection, which the
        # default mode's structure (one request per worker at the servers) rules out.
        out.append(judge("T2", case.label(), cpu_ratio(r, default, tw), AT_MOST, 1.00,
                         steal=steals(r, default, tw)))
    return out



# Issue 20's targets, as printed above their lines.
TITLES20 = {
    "T20a": "T20a production closed-loop requests per proxy CPU-second >= 0.95x the floor's",
    "T20b": "T20b production CPU per request <= 1.05x the floor's, open loop",
    "T20c": f"T20c default (W=64) CPU per request <= 1.10x twemproxy's at {OPEN_RATES[0]:,}/s",
    "T20d": "T20d production proxy user time per request <= 600 ns (0.6 us), closed loop",
}


def issue20_targets(results: list[dict]) -> list:
    """Issue 20's middleware targets over the one-backend rows: the production mode against
    cachelab-floor (T20a, T20b), the default mode against twemproxy (T20c), the production
    mode's user time per request (T20d). Each line notes the same figure for the
    configuration run beside it (the baseline's) when it was run."""
    one = [(Case(**r["case"]), r) for r in results if r["case"]["backends"] == 1]
    prod, default, tw = "cachelab-production", "cachelab-default", "twemproxy"

    def others(r: dict, mode: str, value, unit: str = "x", extra: tuple[str, ...] = ()) -> str:
        """`value(name)`'s median for every configuration compared with `mode` in row r."""
        names = [*extra, f"baseline-{mode}"]
        return ", ".join(f"{n} {fmt_median(value(n), unit)}" for n in names if n in r)

    def user_per_request(r: dict, name: str) -> list[float | None]:
        return per_rep(r, name, "proxy_user_ns_per_request")

    out = []
    for case, r in ((c, r) for c, r in one if c.rate is None):
        # Requests per CPU-second are the inverse of CPU per request: the floor's CPU per
        # request over ours.
        out.append(judge("T20a", case.label(), cpu_ratio(r, FLOOR, prod), AT_LEAST, 0.95,
                         steal=steals(r, prod, FLOOR),
                         note=others(r, "production", lambda n, r=r: cpu_ratio(r, FLOOR, n))))
    for rate in OPEN_RATES:
        for case, r in ((c, r) for c, r in one if c.rate == rate):
            out.append(judge("T20b", case.label(), cpu_ratio(r, prod, FLOOR), AT_MOST, 1.05,
                             steal=steals(r, prod, FLOOR),
                             note=others(r, "production",
                                         lambda n, r=r: cpu_ratio(r, n, FLOOR))))
    for case, r in ((c, r) for c, r in one if c.rate == OPEN_RATES[0]):
        out.append(judge("T20c", case.label(), cpu_ratio(r, default, tw), AT_MOST, 1.10,
                         steal=steals(r, default, tw),
                         note=others(r, "default", lambda n, r=r: cpu_ratio(r, n, tw))))
    for case, r in ((c, r) for c, r in one if c.rate is None):
        out.append(judge("T20d", case.label(), user_per_request(r, prod), AT_MOST, 600, unit="ns",
                         steal=steals(r, prod),
                         note=others(r, "production", lambda n, r=r: user_per_request(r, n), " ns",
                                     extra=(default, FLOOR))))
    return out



def fmt_median(values: list[float | None], unit: str = "x") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    m = statistics.median(values)
    return f"{m:.2f}x" if unit == "x" else f"{m:.0f}{unit}"


# Issue 34's targets, as printed above their lines.
TITLES34 = {
    "T34a": "T34a production CPU per request <= 1.05x the floor's, open loop",
    "T34b": "T34b production closed-loop requests per proxy CPU-second >= 1.05x the floor's",
    "T34c": "T34c production proxy user time per request <= 1.5x the floor's, closed loop",
    "T34d": "T34d default (W=64) CPU per request <= 1.10x twemproxy's, every loop",
}


def issue34_targets(results: list[dict]) -> list:
    """Issue 34's middleware targets over the one-backend rows: the production mode
    against cachelab-floor in open loop (T34a, T20b's bound) and closed loop (T34b: a
    proxy that batches can beat a forwarder there), its user time against the floor's
    (T34c), and the default mode against twemproxy in every loop (T34d)."""
    one = [(Case(**r["case"]), r) for r in results if r["case"]["backends"] == 1]
    prod, default, tw = "cachelab-production", "cachelab-default", "twemproxy"

    def user(r: dict, name: str) -> list[float | None]:
        return per_rep(r, name, "proxy_user_ns_per_request")

    out = []
    for rate in OPEN_RATES:
        for case, r in ((c, r) for c, r in one if c.rate == rate):
            out.append(judge("T34a", case.label(), cpu_ratio(r, prod, FLOOR), AT_MOST, 1.05,
                             steal=steals(r, prod, FLOOR)))
    for case, r in ((c, r) for c, r in one if c.rate is None):
        out.append(judge("T34b", case.label(), cpu_ratio(r, FLOOR, prod), AT_LEAST, 1.05,
                         steal=steals(r, prod, FLOOR)))
    for case, r in ((c, r) for c, r in one if c.rate is None):
        out.append(judge("T34c", case.label(), ratios(user(r, prod), user(r, FLOOR)),
                         AT_MOST, 1.5, steal=steals(r, prod, FLOOR),
                         note=f"{fmt_median(user(r, prod), ' ns')} against "
                              f"{fmt_median(user(r, FLOOR), ' ns')}"))
    for case, r in one:
        out.append(judge("T34d", case.label(), cpu_ratio(r, default, tw), AT_MOST, 1.10,
                         steal=steals(r, default, tw)))
    return out
