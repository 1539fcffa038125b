"""The paper's Figure 1: CE, focal, dice and DSC for one positive example, with their derivatives with
respect to the positive-class probability p and to the logit x, computed by the shipped losses."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from dicelab.losses.registry import build_loss

FIGURE_NAME = "figure1_loss_derivatives.png"


def figure_losses(*, focal_gamma: float, dsc_alpha: float, smooth: float) -> dict[str, dict]:
    """Label -> build_loss arguments of the four curves (dice and DSC per example, as in the paper)."""
    return {
        "CE": {"name": "ce"},
        f"FL (γ={focal_gamma:g})": {"name": "focal", "gamma": focal_gamma},
        f"DL (smoothing {smooth:g})": {"name": "dice", "smooth": smooth, "square_denominator": False},
        f"DSC (α={dsc_alpha:g}, smoothing {smooth:g})": {"name": "dsc", "alpha": dsc_alpha, "smooth": smooth},
    }


def positive_example_curves(loss_arguments: dict, p: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Loss, dL/dp and dL/dx at each probability p of the positive class, one single-example batch each."""
    arguments = dict(loss_arguments)
    loss = build_loss(arguments.pop("name"), **arguments)
    target = torch.ones(1, dtype=torch.long)
    values, by_logit = [], []
    for logit in torch.logit(p.double()):
        x = logit.reshape(1).requires_grad_(True)
        value = loss(x, target)
        values.append(value.item())
        by_logit.append(torch.autograd.grad(value, x)[0].item())
    by_logit = torch.tensor(by_logit, dtype=torch.float64)
    by_probability = by_logit / (p * (1 - p))  # dL/dp = (dL/dx) / (dp/dx)
    return torch.tensor(values, dtype=torch.float64), by_probability, by_logit


def plot_loss_curves(
    out_dir: Path, *, focal_gamma: float = 1.0, dsc_alpha: float = 1.0, smooth: float = 1.0
) -> Path:
    """Write the figure as `out_dir/figure1_loss_derivatives.png` (atomically) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = torch.linspace(0.005, 0.995, 199, dtype=torch.float64)
    curves = {
        label: positive_example_curves(arguments, p)
        for label, arguments in figure_losses(
            focal_gamma=focal_gamma, dsc_alpha=dsc_alpha, smooth=smooth
        ).items()
    }
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.6), constrained_layout=True)
    panels = [
        ("loss", "loss of a positive example", (0.0, 3.0)),
        ("dL/dp", "derivative with respect to p", (-4.0, 1.0)),
        ("dL/dx", "derivative with respect to the logit x", (-1.1, 0.15)),
    ]
    for index, (axis, (ylabel, title, ylim)) in enumerate(zip(axes, panels, strict=True)):
        for label, series in curves.items():
            axis.plot(p.numpy(), series[index].numpy(), label=label, linewidth=2)
        axis.axhline(0.0, color="grey", linewidth=0.8)
        axis.axvline(0.5, color="grey", linewidth=0.8, linestyle=":")
        axis.set(
            xlabel="p, probability of the positive class", ylabel=ylabel, title=title, xlim=(0, 1), ylim=ylim
        )
        axis.grid(alpha=0.3)
    axes[0].legend(loc="upper right")
    turn = 1.0 / (1.0 + dsc_alpha)
    axes[1].annotate(
        f"DSC stops pushing p up\nat p = 1/(1+α) = {turn:.2g}",
        xy=(turn, 0.0),
        xytext=(0.04, 0.35),
        arrowprops={"arrowstyle": "->", "color": "grey"},
    )
    figure.suptitle(
        "Losses of one positive example (y = 1) and their derivatives, after Li et al. (2020), Figure 1"
    )

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FIGURE_NAME
    temporary = out_dir / f".{FIGURE_NAME}.{os.getpid()}.png"  # never a half-written figure under its name
    try:
        figure.savefig(temporary, dpi=120)
        os.replace(temporary, path)
    finally:
        plt.close(figure)
        Path(temporary).unlink(missing_ok=True)
    return path
