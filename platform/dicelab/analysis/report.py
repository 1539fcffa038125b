"""The report: its sections in reading order, written as report.md / report.html and published."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from dicelab.analysis import sections
from dicelab.analysis.caveats import caveats
from dicelab.analysis.context import ReportContext
from dicelab.analysis.decision import decision_blocks, decision_lines
from dicelab.analysis.document import Document, Heading
from dicelab.analysis.held_out import blocks as held_out_blocks
from dicelab.analysis.observations import AnalysisOptions
from dicelab.analysis.publishing import check_replaceable, default_report_dir, log_report, replace_dir
from dicelab.analysis.runs import RunSet
from dicelab.analysis.summary import summary_paragraph
from dicelab.analysis.threshold_figures import threshold_figures
from dicelab.errors import DicelabError
from dicelab.files import unwritable_reason


@dataclass
class Report:
    directory: Path
    markdown: Path
    html: Path
    files: list[Path]  # everything written, report.md and report.html included
    logged_run_id: str | None  # the MLflow run whose `report/` artifacts hold a copy
    notes: list[str] = field(default_factory=list)  # the caveats the report lists
    decision: list[str] = field(default_factory=list)  # the Decision section as plain console lines
    summary: str = ""  # one paragraph: what won, by how much, how sure, what it cost, where to look next


def build_report(
    runs: RunSet,
    out_dir: str | Path | None = None,
    options: AnalysisOptions | None = None,
    *,
    log_to_mlflow: bool = True,
) -> Report:
    """Write report.md, report.html, figures/*.png and the CSVs to `out_dir` (replacing an older report
    there, never anything else), then log the folder under `report/` of the sweep's newest parent run."""
    options = options or AnalysisOptions()
    out = Path(out_dir) if out_dir is not None else default_report_dir(runs.experiments[0])
    out = out.resolve()
    check_replaceable(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as error:  # found before any work: the place, not the analysis, is wrong
        raise DicelabError(f"{out}: cannot write the report there ({unwritable_reason(error)})") from None
    try:
        ctx = ReportContext(runs, options, staging)
        notes = caveats(ctx)
        document = compose(ctx, notes)
        (staging / "report.md").write_text(document.to_markdown(staging), encoding="utf-8")
        (staging / "report.html").write_text(document.to_html(), encoding="utf-8")
        replace_dir(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = sorted(path for path in out.rglob("*") if path.is_file())
    logged = log_report(runs, out) if log_to_mlflow else None
    decision = decision_lines(ctx.decisions, ctx.races, options, ctx.obs, ctx.held_out_statements)
    ui = f"dicelab ui --experiment {runs.experiments[0]}"
    summary = summary_paragraph(ctx.decisions, options, ctx.obs, str(out / "report.html"), ui)
    return Report(out, out / "report.md", out / "report.html", files, logged, notes, decision, summary)


def compose(ctx: ReportContext, notes: list[str]) -> Document:
    document = Document(f"dicelab report: {' vs '.join(ctx.runs.experiments)}")
    # the answer first (what won, by how much, how sure, at what cost), then what qualifies it, then the rest
    document.add(
        *decision_blocks(ctx.decisions, ctx.races, ctx.options, ctx.obs, ctx.held_out_statements),
        *sections.read_first(notes),
        *held_out_blocks(ctx.held_out, ctx.options),
        *threshold_figures(ctx),
        Heading("How the numbers were made", 2),
        *sections.header(ctx),
        *sections.trials(ctx),
        *sections.ablation(ctx),
        *sections.sensitivity(ctx),
        *sections.importance(ctx),
        *sections.parallel_coordinates(ctx),
        *sections.training_curves(ctx),
        *sections.excluded_trials(ctx),
    )
    tables = {
        "trials.csv": ctx.obs.drop(columns=["logged_metrics"]),
        "comparisons.csv": ctx.decisions.comparisons,
        "sensitivity.csv": ctx.curves,
        "ablation.csv": ctx.ablation,
        "importance.csv": ctx.importance.table,
        **({"held_out.csv": ctx.held_out.configurations} if ctx.held_out.has_test else {}),
        **({"threshold_comparisons.csv": ctx.held_out.tuned} if len(ctx.held_out.tuned) else {}),
    }
    document.add(*sections.files(ctx, tables))
    return document
