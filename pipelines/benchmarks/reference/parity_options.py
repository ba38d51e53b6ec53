"""The options of ``reference_parity``: its parser and the checks of their combinations."""

from __future__ import annotations

import argparse

from pipelines.benchmarks.reference.parity_sources import add_source_arguments
from pipelines.flag_table import add_flag

__all__ = ["build_parser", "parse_checked"]


def build_parser(doc: str, models: tuple[str, ...]) -> argparse.ArgumentParser:
    """The parser of ``reference_parity``, whose module docstring ``doc`` gives its
    description and epilog; ``models`` are the released code's models."""
    p = argparse.ArgumentParser(
        prog="reference_parity", description=doc.split("\n\n")[0], epilog=doc
    )
    add_source_arguments(p)
    _add_run_options(p)
    _add_model_options(p, models)
    _add_side_options(p)
    return p


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """``--folds`` .. ``--data-seed``: the folds, epochs and seeds of both sides."""
    add_flag(p, "folds")
    add_flag(p, "epochs", default=30, help="epochs on both sides. Default: 30")
    add_flag(
        p,
        "seed",
        default=0,
        help="first seed on both sides; it also simulates the clicks of our conversion. Default: 0",
    )
    add_flag(
        p,
        "seeds",
        default="1",
        help="runs per model and fold on each side, with seeds --seed .. --seed + N - "
        "1; with --recorded-only, 'all' takes every seed the record holds. "
        "Default: 1",
        type=None,
    )
    p.add_argument(
        "--fold-seeds",
        action="store_true",
        help="seed s on fold f is 1000 f + s on both sides, so that the folds are "
        "independent draws (a seed fixes the initial weights of every fold it runs on)",
    )
    p.add_argument(
        "--data-seed",
        type=int,
        help="the seed of our conversion's click simulation (the lists both sides train "
        "and test on). Default: --seed",
    )


def _add_model_options(p: argparse.ArgumentParser, models: tuple[str, ...]) -> None:
    """``--labels``, ``--models`` and ``--output``: the lists the released code sees,
    our models beside its ``models``, and where everything goes."""
    p.add_argument(
        "--labels",
        choices=["shared", "own"],
        default="shared",
        help="shared: the released code trains and tests on our conversion's lists and "
        "clicks, so the two sides are paired fold by fold; own: it simulates its own clicks "
        "from the LETOR files, as its main.py. Default: shared",
    )
    add_flag(
        p,
        "models",
        default=",".join(models),
        help="ours, as tfr-experiment specs (NAME[:KEY=VALUE...]), each beside the "
        "released model of the same NAME. Default: rankformer,transformer,mlp",
    )
    add_flag(p, "output", required=True, help="where data, runs and the table go")


def _add_side_options(p: argparse.ArgumentParser) -> None:
    """``--side`` .. ``--recorded-only``: which sides run, and the record of finished runs."""
    p.add_argument(
        "--side",
        choices=["both", "ours", "released"],
        default="both",
        help="run both sides, or one (e.g. in two processes; a later run with both reuses "
        "their results). Default: both",
    )
    add_flag(
        p,
        "official_threads",
        help="torch's threads for the released code (on a busy machine 1 avoids "
        "stalls). Default: 2",
    )
    add_flag(
        p,
        "record",
        help="a JSON-lines file of finished runs (both sides, with their settings and CPU): "
        "runs found in it are reused, new ones appended, so a benchmark longer than one "
        "sitting or machine can be finished elsewhere; the table can be printed from it "
        "without the released code. Default: none",
    )
    p.add_argument(
        "--recorded-only",
        action="store_true",
        help="train and run nothing: print the table from the --record file's runs, "
        "leaving out (and listing) every model, fold and seed it lacks on either side, "
        "so a benchmark finished in parts can be reported part of the way",
    )


def parse_checked(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``argv`` parsed, with ``data_seed`` (default ``--seed``) and ``seeds`` (an int, or
    ``"all"`` with ``--recorded-only``) settled; a bad combination ends in ``p.error``."""
    args = p.parse_args(argv)
    if args.data_seed is None:
        args.data_seed = args.seed
    if args.seeds == "all" and not args.recorded_only:
        p.error("--seeds all needs --recorded-only")
    if args.seeds != "all":
        if not args.seeds.isdigit() or int(args.seeds) < 1:
            p.error(f"--seeds must be an int >= 1 or 'all', got {args.seeds}")
        args.seeds = int(args.seeds)
    if args.recorded_only and not args.record:
        p.error("--recorded-only needs --record FILE")
    return args
