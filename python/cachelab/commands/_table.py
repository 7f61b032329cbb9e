"""Plain-text tables and number formats for command output.

Formatted by hand, not with rich, so the text is the same on every terminal width and can
be compared byte for byte with golden files.
"""

from __future__ import annotations

from collections.abc import Sequence


def render(headers: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> str:
    """Columns separated by two spaces; the first `left` columns flush left, the rest flush
    right (numbers line up on their last digit). No trailing spaces."""
    table = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(r[c]) for r in table) for c in range(len(headers))]
    lines = []
    for row in table:
        cells = [cell.ljust(w) if c < left else cell.rjust(w)
                 for c, (cell, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def num(value: float | None, spec: str = ".6g") -> str:
    """A number in a fixed format, "-" for None; -0 prints as 0."""
    if value is None:
        return "-"
    return format(value + 0.0 if value == 0 else value, spec)
