"""The plots of one page, by the section they belong to: drawn once each and kept inline in
the page (SVG as a data URI, so a report is one file that can be mailed), or, when asked,
written as PNG files into a directory beside it."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from cachelab.report import plots


class Figures:
    """`directory` None: every image inline in the page (SVG); else PNG files there,
    linked as `prefix/NAME.png` (the old PNGs in it removed first)."""

    def __init__(self, directory: Path | None = None, prefix: str = "") -> None:
        self.directory = directory
        self.prefix = prefix
        self.by_section: dict[str, list[dict[str, str]]] = {}
        if directory is not None:
            directory.mkdir(exist_ok=True)
            for old in directory.glob("*.png"):
                old.unlink()

    def add(self, section: str, name: str, title: str, draw: Callable[[Axes], None],
            **size: Any) -> None:
        self.add_grid(section, name, title, [draw], ncols=1, **size)

    def add_grid(self, section: str, name: str, title: str,
                 draws: Sequence[Callable[[Axes], None]], **size: Any) -> None:
        if self.directory is not None:
            plots.render_grid(self.directory / f"{name}.png", draws, **size)
            src = f"{self.prefix}/{name}.png"
        else:
            buffer = io.BytesIO()
            plots.render_grid(buffer, draws, fmt="svg", **size)
            src = "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode()
        self.by_section.setdefault(section, []).append(
            {"file": src, "title": title, "name": name})

    def __getitem__(self, section: str) -> list[dict[str, str]]:
        return self.by_section.get(section, [])
