"""The command-line options of ``reference_runner.py``.

The runner imports this module from its own directory: it runs under another
Python (the released code's, with torch) where this project is not installed,
so this module imports nothing of the project.
"""

from __future__ import annotations

import argparse

__all__ = ["build_parser"]


def build_parser(description: str, models: tuple[str, ...]) -> argparse.ArgumentParser:
    """The runner's parser: its inputs, the training of ``models`` (all by default),
    and the two modes that train nothing to the end (``--equivalence``, ``--click-stats``)."""
    parser = argparse.ArgumentParser(description=description)
    _add_input_options(parser)
    _add_training_options(parser, models)
    _add_mode_options(parser)
    return parser


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    """``--official-dir``, ``--train`` and ``--test``."""
    parser.add_argument("--official-dir", required=True, help="checkout of the released code")
    parser.add_argument(
        "--train", required=True, help="the fold's LETOR training file, or .npz lists"
    )
    parser.add_argument(
        "--test", default=None, help="the fold's LETOR test file, or .npz lists (needed to train)"
    )


def _add_training_options(parser: argparse.ArgumentParser, models: tuple[str, ...]) -> None:
    """``--epochs`` .. ``--curve``: the training runs."""
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", default=",".join(models))
    parser.add_argument("--threads", type=int, default=2, help="torch's intra-op threads")
    parser.add_argument(
        "--batch-size", type=int, default=2048, help="lists per batch (the released 2048)"
    )
    parser.add_argument(
        "--curve",
        type=int,
        default=0,
        metavar="N",
        help="also print the test metrics and the epoch's mean training loss after every "
        "N-th epoch (learning curves)",
    )


def _add_mode_options(parser: argparse.ArgumentParser) -> None:
    """``--equivalence`` (with its lists and steps) and ``--click-stats``."""
    parser.add_argument(
        "--equivalence",
        metavar="OUT.npz",
        help="train nothing to the end: write the first --equivalence-steps full-batch "
        "steps of each model without dropout on --equivalence-lists training lists "
        "to OUT.npz (OUT-<model>.npz with several models)",
    )
    parser.add_argument("--equivalence-lists", type=int, default=256)
    parser.add_argument("--equivalence-steps", type=int, default=30)
    parser.add_argument(
        "--click-stats", type=int, metavar="N", help="only print N draws' click statistics"
    )
