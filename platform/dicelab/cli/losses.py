"""`dicelab losses plot --out DIR`: the paper's Figure 1, losses of a positive example and slopes."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    plot = actions.add_parser(
        "plot",
        help="plot CE, focal, dice and DSC for a positive example with their derivatives (Figure 1)",
        description="Write DIR/figure1_loss_derivatives.png: each loss of one positive example and its "
        "derivative with respect to the positive-class probability p and to the logit.",
    )
    plot.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory for the PNG")
    plot.add_argument("--focal-gamma", type=float, default=1.0, help="focal loss gamma (default 1)")
    plot.add_argument(
        "--dsc-alpha", type=float, default=1.0, help="DSC alpha, the exponent of 1 - p (default 1)"
    )
    plot.add_argument("--smooth", type=float, default=1.0, help="dice / DSC smoothing gamma (default 1)")


def run(args: argparse.Namespace) -> int:
    from dicelab.errors import DataError
    from dicelab.files import unwritable_reason
    from dicelab.losses._plot import plot_loss_curves

    if args.out.exists() and not args.out.is_dir():
        raise DataError(f"--out {args.out}: is a file (give a directory for the figure)")
    try:
        path = plot_loss_curves(
            args.out, focal_gamma=args.focal_gamma, dsc_alpha=args.dsc_alpha, smooth=args.smooth
        )
    except OSError as error:  # a folder that cannot be made or written: the argument's fault, said so
        raise DataError(
            f"--out {args.out}: cannot write the figure there ({unwritable_reason(error)})"
        ) from None
    print(path)
    return 0
