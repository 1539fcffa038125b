"""The report end to end: files, real PNGs, an HTML page that opens offline, artifacts, the CLI."""

import base64
import re
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from dicelab.analysis import build_report, load_runs
from dicelab.cli import main
from dicelab.errors import DicelabError
from dicelab.tracking import conventions as names

PAPER = {
    "metric": "f1",
    "split": "test",
    "results": {"ce": {"original": 91.3}},
    "sensitivity": {"tversky": {"0.6": 84.67}},
    "baselines": {"BERT-Tagger": 92.8},
}


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


class _Resources(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [value or "" for name, value in attrs if name in ("src", "href")]


@pytest.fixture(scope="module")
def sweep(module_sweep_log):
    log = module_sweep_log("quickstart", paper=PAPER)
    for alpha, base in ((0.3, 0.70), (0.6, 0.76), (0.9, 0.72)):
        for seed in range(2):
            params = {"loss.alpha": alpha, "loss.beta": round(1 - alpha, 6)}
            log.trial(base + seed / 100, loss="tversky", seed=seed, params=params)
    for variant, base in (("original", 0.74), ("+positive", 0.75)):
        for seed in range(2):
            log.trial(base + seed / 100, loss="ce", variant=variant, seed=seed)
    log.trial(
        None, loss="ce", seed=7, outcome="failed", reason="RuntimeError: CUDA out of memory", history=[]
    )
    return log


@pytest.fixture(scope="module")
def report(sweep, module_tracking_uri, tmp_path_factory):
    out = tmp_path_factory.mktemp("reports") / "quickstart"
    return build_report(load_runs("quickstart", module_tracking_uri), out)


def test_report_folder_holds_markdown_html_csvs_and_figures(report):
    names_written = {path.relative_to(report.directory).as_posix() for path in report.files}
    assert {
        "report.md",
        "report.html",
        "trials.csv",
        "sensitivity.csv",
        "ablation.csv",
        "importance.csv",
    } <= (names_written)
    kinds = {Path(name).name.split("_")[0] for name in names_written if name.startswith("figures/")}
    assert kinds == {"sensitivity", "importance", "parallel", "training"}
    markdown = report.markdown.read_text(encoding="utf-8")
    for link in (line.split("](")[1].rstrip(")") for line in markdown.splitlines() if line.startswith("![")):
        assert (report.directory / link).is_file()
    assert "RuntimeError: CUDA out of memory" in markdown  # the failed trial is listed with its reason
    assert "| `ce` (paper) | 91.30 |" in markdown
    assert "| BERT-Tagger (paper) | 92.80 |" in markdown  # the table's other printed rows
    assert "the paper table's other printed rows (`paper.baselines`)" in markdown
    assert "The paper's numbers are test-set numbers; dicelab's are dev numbers" in markdown
    assert "beta = 1 − alpha" in markdown
    assert "With 2 seeds a 95% t-interval reaches ±12.7 standard errors" in markdown


def test_figures_are_real_pngs_of_the_expected_size(report):
    figures = [path for path in report.files if path.suffix == ".png"]
    for path in figures:
        width, height = png_size(path.read_bytes())
        if not path.name.startswith("importance"):  # importance grows with its panels
            assert (width, height) == (900, 500), path.name
        else:
            assert width == 900 and height > 200


def test_html_is_self_contained(report):
    text = report.html.read_text(encoding="utf-8")
    parser = _Resources()
    parser.feed(text)
    assert not {"script", "link", "iframe"} & set(parser.tags)
    assert parser.urls and all(url.startswith("data:image/png;base64,") for url in parser.urls)
    assert "http://" not in text and "https://" not in text
    pngs = sorted(png_size(base64.b64decode(url.split(",", 1)[1])) for url in parser.urls)
    files = sorted(png_size(path.read_bytes()) for path in report.files if path.suffix == ".png")
    assert pngs == files


def test_report_is_logged_to_the_parent_run(report, sweep):
    assert report.logged_run_id == sweep.parent_id
    logged = {item.path for item in sweep.client.list_artifacts(sweep.parent_id, names.REPORT_DIR)}
    assert {"report/report.html", "report/report.md", "report/figures", "report/ablation.csv"} <= logged


def test_rebuilding_replaces_an_older_report_but_never_a_foreign_folder(
    report, sweep, module_tracking_uri, tmp_path
):
    runs = load_runs("quickstart", module_tracking_uri)
    stale = report.directory / "figures" / "stale.png"
    stale.write_bytes(b"old")
    again = build_report(runs, report.directory, log_to_mlflow=False)
    assert again.html.is_file() and not stale.exists()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(DicelabError, match="not a dicelab report folder"):
        build_report(runs, foreign, log_to_mlflow=False)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_single_seed_sweep_without_parent_says_so_and_gets_an_analysis_run(tracking_uri, sweep_log, tmp_path):
    log = sweep_log("single", parent=False)
    for alpha, value in ((0.3, 0.70), (0.6, 0.75)):
        log.trial(value, loss="tversky", params={"loss.alpha": alpha, "loss.beta": round(1 - alpha, 6)})
    report = build_report(load_runs("single", tracking_uri), tmp_path / "out")
    markdown = report.markdown.read_text(encoding="utf-8")
    assert "single usable seed: no confidence interval" in markdown
    assert "single seed: no interval" in markdown
    assert "importance skipped, 2 usable trials" in markdown
    client = MlflowClient(tracking_uri)
    run = client.get_run(report.logged_run_id)
    assert run.data.tags[names.ROLE] == "analysis"
    again = build_report(load_runs("single", tracking_uri), tmp_path / "out")
    assert again.logged_run_id == report.logged_run_id  # reused, not one more run per analysis


def test_cli_writes_the_report_and_prints_where(sweep, module_tracking_uri, tmp_path, capsys):
    out = tmp_path / "cli-report"
    code = main(["analyze", "--experiment", "quickstart", "--tracking-uri", module_tracking_uri,
                 "--out", str(out), "--no-log"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    assert f"report: {out / 'report.html'}" in printed
    assert "1 failed" in printed


def test_cli_out_where_no_folder_can_be_made_is_one_line(sweep, module_tracking_uri, tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    for out in (tmp_path / "afile" / "report", tmp_path / "afile" / "sub" / "report"):
        code = main(["analyze", "--experiment", "quickstart", "--tracking-uri", module_tracking_uri,
                     "--out", str(out), "--no-log"])  # fmt: skip
        error = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        assert error == [f"dicelab analyze: error: {out}: cannot write the report there (Not a directory)"]
    assert [path.name for path in tmp_path.iterdir()] == ["afile"]


def test_cli_unknown_experiment_is_a_one_line_error(sweep, module_tracking_uri, capsys):
    code = main(["analyze", "--experiment", "nope", "--tracking-uri", module_tracking_uri])
    error = capsys.readouterr().err.strip()
    assert code == 2
    assert len(error.splitlines()) == 1
    assert "no experiment 'nope'" in error and "quickstart" in error


def test_a_sweep_where_every_trial_failed_still_reports_them(tracking_uri, sweep_log, tmp_path):
    log = sweep_log("broken")
    log.trial(None, outcome="failed", reason="ValueError: bad batch", history=[])
    log.trial(None, seed=1, outcome="non_finite", reason="loss became NaN at step 3", history=[])
    report = build_report(load_runs("broken", tracking_uri), tmp_path / "out", log_to_mlflow=False)
    markdown = report.markdown.read_text(encoding="utf-8")
    assert "None of the 2 trials has a usable value" in markdown
    assert "ValueError: bad batch" in markdown and "loss became NaN at step 3" in markdown
    assert "| `ce` | — [2 failed] |" in markdown
    assert not any(path.suffix == ".png" for path in report.files)


def test_the_report_opens_on_the_decision_then_the_caveats(report):
    markdown = report.markdown.read_text(encoding="utf-8")
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings[:3] == ["## Decision", "## Read this first", "## How the numbers were made"]


def test_cli_ends_with_one_paragraph_saying_what_won_and_where_to_look(
    sweep, module_tracking_uri, tmp_path, capsys
):
    out = tmp_path / "cli-summary"
    main(["analyze", "--experiment", "quickstart", "--tracking-uri", module_tracking_uri,
          "--out", str(out), "--no-log"])  # fmt: skip
    last = capsys.readouterr().out.strip().split("\n\n")[-1]
    assert "\n" not in last and last.startswith("In short: ")
    assert "scored best" in last and "dicelab ui --experiment quickstart" in last
    assert str(out / "report.html") in last


def test_a_second_sweep_is_analysed_on_its_own_with_a_note(tracking_uri, sweep_log, tmp_path, capsys):
    first = sweep_log("again", sweep_id="first")
    for seed in range(3):
        first.trial(0.5, seed=seed)
        first.trial(0.9, loss="dice", seed=seed)
    second = sweep_log("again", sweep_id="second")
    for seed in range(3):
        second.trial(0.7 + seed / 100, seed=seed)
        second.trial(0.6 + seed / 100, loss="dice", seed=seed)
    code = main(["analyze", "--experiment", "again", "--tracking-uri", tracking_uri,
                 "--out", str(tmp_path / "newest"), "--no-log"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0 and "again: 6 trials" in printed
    assert "swept 2 times: this report judges the newest sweep, second, on its own" in printed
    assert re.search(r"Best: (loss\.name=)?ce\b", printed)  # the first sweep's dice (0.9) is not pooled in
    main(["analyze", "--experiment", "again", "--tracking-uri", tracking_uri, "--all-sweeps",
          "--out", str(tmp_path / "pooled"), "--no-log"])  # fmt: skip
    assert "again: 12 trials" in capsys.readouterr().out
