"""The shipped synthetic trace is what its script makes, and keeps the promises of its doc."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

TRACES = Path(__file__).resolve().parents[2] / "experiments" / "traces"


def test_the_shipped_trace_is_what_the_script_makes(tmp_path):
    out = tmp_path / "cachelab-synthetic.csv"
    subprocess.run([sys.executable, str(TRACES / "make_synthetic_trace.py"), str(out)],
                   check=True, timeout=60)
    assert out.read_bytes() == (TRACES / "synthetic.csv").read_bytes()


def test_the_trace_is_small_sub_second_zipf_and_mixed():
    shipped = TRACES / "synthetic.csv"
    assert shipped.stat().st_size < 200_000
    rows = [line.split(",") for line in shipped.read_text().splitlines()]
    assert len(rows) == 4000
    times = [float(r[0]) for r in rows]
    assert times == sorted(times) and 9 < times[-1] - times[0] < 11
    assert any(t != int(t) for t in times)
    assert len({r[4] for r in rows}) == 8
    ops = Counter(r[5] for r in rows)
    assert set(ops) == {"get", "gets", "set", "add", "delete"} and ops["get"] > ops["set"]
    top = Counter(r[1] for r in rows).most_common(1)[0][1]
    assert top > 4000 * 0.05  # zipf: the most popular key alone is over 5% of requests
