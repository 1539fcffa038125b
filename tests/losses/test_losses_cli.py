"""`dicelab losses plot`: the paper's Figure 1 as a PNG, with curves that match the formulas."""

from __future__ import annotations

import sys

import pytest
import torch

from dicelab.cli import main
from dicelab.losses._plot import FIGURE_NAME, figure_losses, positive_example_curves


def test_plot_writes_the_figure(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    out = tmp_path / "figures"
    assert main(["losses", "plot", "--out", str(out), "--dsc-alpha", "0.5"]) == 0
    path = out / FIGURE_NAME
    assert capsys.readouterr().out.strip() == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width, _ = matplotlib.image.imread(path).shape
    assert width > 2 * height > 600
    assert sorted(p.name for p in out.iterdir()) == [FIGURE_NAME]  # no temporary file left behind


@pytest.mark.parametrize(
    ("out", "message"),
    [
        ("afile", "--out {tmp}/afile: is a file (give a directory for the figure)"),
        ("afile/figures", "--out {tmp}/afile/figures: cannot write the figure there (Not a directory)"),
    ],
)
def test_an_out_that_cannot_hold_the_figure_is_one_line_exit_2(out, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    (tmp_path / "afile").write_text("")
    assert main(["losses", "plot", "--out", str(tmp_path / out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"dicelab losses: error: {message.format(tmp=tmp_path)}"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile"]


def test_plot_needs_an_action(monkeypatch) -> None:
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    with pytest.raises(SystemExit):
        main(["losses"])


def test_curves_match_the_formulas_for_a_positive_example() -> None:
    p = torch.tensor([0.1, 0.3, 0.5, 0.7, 0.9], dtype=torch.float64)
    losses = figure_losses(focal_gamma=1.0, dsc_alpha=1.0, smooth=1.0)
    q = p * (1 - p)
    expected = {  # loss and dL/dp, worked out by hand
        "CE": (-torch.log(p), -1 / p),
        "FL (γ=1)": (-(1 - p) * torch.log(p), torch.log(p) - (1 - p) / p),
        "DL (smoothing 1)": (1 - (2 * p + 1) / (p + 2), -3 / (p + 2) ** 2),
        "DSC (α=1, smoothing 1)": (1 - (2 * q + 1) / (q + 2), -3 / (q + 2) ** 2 * (1 - 2 * p)),
    }
    assert list(losses) == list(expected)
    for label, arguments in losses.items():
        value, by_probability, by_logit = positive_example_curves(arguments, p)
        torch.testing.assert_close(value, expected[label][0])
        torch.testing.assert_close(by_probability, expected[label][1])
        torch.testing.assert_close(by_logit, expected[label][1] * p * (1 - p))
