"""Forward + backward time of every dicelab loss against cross entropy on the same logits, in one run.

    .venv/bin/python benchmarks/losses.py [--rounds 15] [--block-seconds 0.1]

CPU, float32, one thread; the clock is the thread's CPU time, best of interleaved rounds (robust on a
shared machine). Cases: token tagging N=65,536 positions x C=9 classes (baseline
`torch.nn.functional.cross_entropy`) and binary N=16,384 (baseline `binary_cross_entropy_with_logits`,
the cross entropy of sigmoid logits), every loss at its defaults plus `dsc` at alpha=0.5. Goal: every
loss <= 3x its baseline. A second table times `dsc` at C=18 (the official multi-class settings:
level="example", square_denominator=True, class_reduction="sum", alpha=0.5) against the same loss
computed the way the official ShannonAI code does it, a Python loop over classes with one (N, 1) column
at a time; goal: >= 3x faster. Prints markdown tables.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm import tqdm

from dicelab.losses import LOSSES, build_loss

DSC_OFFICIAL_SETTINGS = {
    "alpha": 0.5,
    "smooth": 1.0,
    "square_denominator": True,
    "level": "example",
    "class_reduction": "sum",
}


def make_case(n: int, num_classes: int | None, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Imbalanced targets (about 80% class 0) and random logits; num_classes None: binary (N,) logits."""
    generator = torch.Generator().manual_seed(seed)
    classes = num_classes or 2
    target = torch.where(
        torch.rand(n, generator=generator) < 0.8, 0, torch.randint(1, classes, (n,), generator=generator)
    )
    shape = (n,) if num_classes is None else (n, num_classes)
    return 2.0 * torch.randn(shape, generator=generator), target


# (label, registered name, parameters): every loss at its defaults, and dsc also at a fractional alpha,
# which takes the exp(alpha log(1 - p)) path (whole powers are multiplied out).
LOSS_SETTINGS = [(name, name, {}) for name in LOSSES.names()] + [("dsc α=0.5", "dsc", {"alpha": 0.5})]


def loss_params(name: str, params: dict, target: Tensor, classes: int) -> dict:
    if name == "wce":
        return {**params, "class_counts": torch.bincount(target, minlength=classes).tolist()}
    return params


def training_step(
    loss_fn: Callable[[Tensor, Tensor], Tensor], logits: Tensor, target: Tensor
) -> Callable[[], None]:
    """One forward + backward pass of `loss_fn` on its own copy of the logits."""
    logits = logits.detach().clone().requires_grad_(True)

    def step() -> None:
        logits.grad = None
        loss_fn(logits, target).backward()

    return step


def best_times(steps: dict[str, Callable[[], None]], rounds: int, block_seconds: float) -> dict[str, float]:
    """CPU seconds per call of each step: the best of `rounds` timed blocks, in interleaved rounds.

    The clock is the benchmark thread's CPU time, which excludes time spent descheduled while other
    processes run (a shared machine), and interleaving spreads remaining load changes over all steps.
    """
    calls = {}
    for name, step in steps.items():
        step()  # warm-up
        start = time.thread_time()
        step()
        calls[name] = max(1, int(block_seconds / max(time.thread_time() - start, 1e-6)))
    best = dict.fromkeys(steps, math.inf)
    for _ in tqdm(range(rounds), desc=f"timing {', '.join(steps)}", leave=False):
        for name, step in steps.items():
            start = time.thread_time()
            for _ in range(calls[name]):
                step()
            best[name] = min(best[name], (time.thread_time() - start) / calls[name])
    return best


def official_dsc_loop(logits: Tensor, target: Tensor, *, alpha: float, smooth: float) -> Tensor:
    """The official multi-class path (square denominator): softmax, then one (N, 1) column per class."""
    probs = torch.softmax(logits, dim=1)
    one_hot = F.one_hot(target, num_classes=logits.shape[-1]).float()
    loss = None
    for index in range(logits.shape[-1]):
        column, column_target = probs[:, index].view(-1, 1), one_hot[:, index].view(-1, 1)
        column = ((1 - column) ** alpha) * column
        intersection = torch.sum(column * column_target, -1)
        column_loss = 1 - (2 * intersection + smooth) / (
            torch.sum(torch.square(column), -1) + torch.sum(torch.square(column_target), -1) + smooth
        )
        loss = column_loss if loss is None else loss + column_loss
    return loss.mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timing rounds (best one counts)")
    parser.add_argument("--block-seconds", type=float, default=0.1, help="seconds per timed block")
    args = parser.parse_args()
    torch.set_num_threads(1)

    cases = {"tagging N=65,536 C=9": make_case(65_536, 9), "binary N=16,384": make_case(16_384, None)}
    rows = []
    for case, (logits, target) in cases.items():
        binary = logits.dim() == 1
        baseline_name = "binary_cross_entropy_with_logits" if binary else "cross_entropy"
        baseline_fn = (
            (lambda x, t: F.binary_cross_entropy_with_logits(x, t.float())) if binary else F.cross_entropy
        )
        steps = {baseline_name: training_step(baseline_fn, logits, target)}
        for label, name, params in LOSS_SETTINGS:
            loss = build_loss(name, **loss_params(name, params, target, 2 if binary else logits.shape[-1]))
            steps[label] = training_step(loss, logits, target)
        times = best_times(steps, args.rounds, args.block_seconds)
        rows += [
            (case, label, times[label], baseline_name, times[baseline_name]) for label, _, _ in LOSS_SETTINGS
        ]

    logits, target = make_case(65_536, 18)
    ours = build_loss("dsc", **DSC_OFFICIAL_SETTINGS)
    official = partial(
        official_dsc_loop, alpha=DSC_OFFICIAL_SETTINGS["alpha"], smooth=DSC_OFFICIAL_SETTINGS["smooth"]
    )
    torch.testing.assert_close(ours(logits, target), official(logits, target))  # the same loss
    times = best_times(
        {"official": training_step(official, logits, target), "ours": training_step(ours, logits, target)},
        args.rounds,
        args.block_seconds,
    )

    print(
        f"torch {torch.__version__}, CPU float32, 1 thread, forward + backward, thread CPU time, best "
        f"of {args.rounds} interleaved rounds\n"
    )
    print("| case | loss | time (ms) | baseline | baseline (ms) | loss / baseline (goal <= 3) |")
    print("|---|---|---:|---|---:|---:|")
    for case, name, seconds, baseline_name, baseline in rows:
        print(
            f"| {case} | {name} | {seconds * 1e3:.2f} | {baseline_name} | {baseline * 1e3:.2f} | "
            f"{seconds / baseline:.2f} |"
        )
    print("\n| dsc, N=65,536 C=18 (official multi-class settings) | time (ms) |\n|---|---:|")
    official_label = "official way: Python loop over classes, one (N, 1) column at a time"
    print(f"| {official_label} | {times['official'] * 1e3:.2f} |")
    print(f"| dicelab, vectorised over classes | {times['ours'] * 1e3:.2f} |")
    print(f"| speed-up (goal >= 3) | {times['official'] / times['ours']:.2f}x |")


if __name__ == "__main__":
    main()
