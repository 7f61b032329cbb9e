"""Everything the report shows, assembled once from the database: the page, its plots and
`cachelab export DIR --table NAME` all read this, so a table on the page and its export
hold the same numbers."""

from __future__ import annotations

from dataclasses import dataclass

from cachelab.analysis.errors import AnalysisError
from cachelab.errors import UserError
from cachelab.report import data, designs, distributions, models
from cachelab.report import study as study_mod
from cachelab.report import tls as tls_mod
from cachelab.report.data import Curve, LawRow, QosRow, ReportData
from cachelab.spec import naming
from cachelab.store import Store


@dataclass(frozen=True)
class Sections:
    data: ReportData
    curves: list[Curve]
    ticks: list[str] | None
    x_path: str
    xlabel: str
    log_x: bool
    designs: designs.Designs | None
    #: Why there is no factorial section (or which groups were skipped).
    design_note: str | None
    queueing: list[models.QueueingPoint]
    mva: list[models.MvaSection]
    mva_note: str | None
    distributions: list[distributions.OpDistribution]
    qos: list[QosRow]
    laws: list[LawRow]
    #: Points with TLS beside their pairs without (empty without TLS).
    tls: list[tls_mod.TlsCost]
    #: The original study's values beside ours (`[study]`), or why there are none.
    study: study_mod.StudyComparison | None = None
    study_note: str | None = None

    @property
    def tick_names(self) -> list[str] | None:
        """The x axis's levels as a reader says them ("read-only"), when not numeric."""
        return None if self.ticks is None else [data.x_level(self.x_path, float(i), self.ticks)
                                                for i in range(len(self.ticks))]

    @property
    def mixed_ops(self) -> bool:
        """Whether some point's workload mixes operation types (set, get, multi-get)."""
        return any(len(p.ops) > 1 for c in self.curves for p in c.points)


def build(s: Store) -> Sections:
    d = data.load(s)
    found, ticks = data.curves(d)
    x_path, xlabel = data.x_axis(d)
    found_designs, note = None, None
    try:
        found_designs = designs.analyse(s)
        if found_designs.plan.skipped:
            note = "not analysed: " + "; ".join(found_designs.plan.skipped)
        if not found_designs.analysed:
            found_designs = None
    except AnalysisError as exc:
        note = str(exc)
    note = note and readable_note(note, d.settings.get("factors", []))
    mva, mva_note = models.mva_sections(found, x_path)
    study, study_note = None, None
    try:
        cited = study_mod.load(d.source, list(d.settings.get("factors", [])))
        if cited is not None:
            study = study_mod.compare(cited, found_designs, d.points,
                                      d.settings.get("qos_target_ms", 1.0))
    except UserError as exc:
        study_note = f"The experiment's [study] section cannot be read: {exc}"
    return Sections(
        data=d, curves=found, ticks=ticks, x_path=x_path, xlabel=xlabel,
        log_x=data.log_x(found, ticks), designs=found_designs, design_note=note,
        queueing=models.queueing_points(found, x_path), mva=mva, mva_note=mva_note,
        distributions=distributions.distributions(s, found, d.settings),
        qos=data.qos_rows(found, d.settings["qos_target_ms"], x_path, ticks),
        laws=data.interactive_rows(d),
        tls=tls_mod.costs(s, d),
        study=study, study_note=study_note,
    )


def readable_note(text: str, factors: list[str]) -> str:
    """The analysis's message (written for `cachelab factorial`, with factor paths) with
    each factor as a reader says it ("clients per load thread has 3 level(s)")."""
    for path in sorted(factors, key=len, reverse=True):
        text = text.replace(path, naming.factor_name(path))
    return text
