"""Our click simulation beside the RankFormer authors' released one, draw by draw.

Both simulate clicks and purchases (purchase label 4) on one LETOR file, each
with its own random generator, ``--draws`` times with seeds ``--seed`` ..; the
table gives each statistic's mean and standard deviation over the draws on
both sides and the difference of the means in units of the standard error of
that difference. The statistics (``reference_runner.list_stats``): the share
of lists whose best simulated label t is 0, 1 and 4, clicks and purchases per
list, the share of lists whose best explicit relevance is 0 and 2 (which items
each bootstrap keeps), and items per list. The released side runs in a Python
with pandas through ``reference_runner.py --click-stats``.

Usage::

    python -m pipelines.benchmarks.reference.click_parity --dataset MQ2008 --data-dir DIR \\
        --fold 1 --draws 10 --official-dir rankformer-official \\
        --official-python ref-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys

import numpy as np

from pipelines.benchmarks.reference import parity_sources, reference_runner
from pipelines.flag_table import add_flag
from tfr_rankformer.core.elwc_schema import SPLITS


def our_draws(path: str, *, split: str, max_relevance: int, draws: int, seed: int) -> list[dict]:
    """:func:`reference_runner.list_stats` of ``draws`` runs of our simulation on
    the LETOR file ``path``, each list drawn as ``tfr-convert`` draws it."""
    from tfrecords_tools.click_simulation import ClickConfig, list_rng, simulate_clicks

    frame = reference_runner.read_letor(path)
    qids = frame["qid"].to_numpy()
    relevance = frame["target"].to_numpy()
    order = np.argsort(qids, kind="stable")
    starts = np.r_[0, np.flatnonzero(np.diff(qids[order])) + 1, len(order)]
    groups = [(int(qids[order[a]]), relevance[order[a:b]]) for a, b in zip(starts, starts[1:])]
    config = ClickConfig(purchase_label=4)
    results = []
    for draw_seed in range(seed, seed + draws):
        labels, relevances, sizes = [], [], []
        for qid, values in groups:
            rng = list_rng(draw_seed, split, qid)
            lists = simulate_clicks(values, rng=rng, config=config, max_relevance=max_relevance)
            labels.append(lists.labels.ravel())
            relevances.append(values[lists.indices].ravel())
            sizes += [lists.indices.shape[1]] * lists.indices.shape[0]
        offsets = np.r_[0, np.cumsum(sizes)]
        stats = reference_runner.list_stats(
            np.concatenate(labels), np.concatenate(relevances), offsets
        )
        results.append({"seed": draw_seed, **stats})
    return results


def their_draws(setup, path: str, *, draws: int, seed: int) -> list[dict]:
    """The released simulation's statistics, ``draws`` runs, from its own Python."""
    directory, python = setup
    command = [python, parity_sources.RUNNER, "--official-dir", directory, "--train", path]
    command += ["--seed", str(seed), "--click-stats", str(draws)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the released simulation failed:\n{done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def table(sides: dict[str, list[dict]], title: str) -> str:
    """Markdown: per statistic, mean ± standard deviation over draws per side, and
    the difference of the means over its standard error (``z``)."""
    names = [k for k in next(iter(sides.values()))[0] if k != "seed"]
    header = " | ".join(f"{side} (mean ± sd)" for side in sides)
    lines = [title, "", f"| statistic | {header} | z |", "|---|" + "---|" * (len(sides) + 1)]
    for name in names:
        cells, moments = [], []
        for draws in sides.values():
            values = [d[name] for d in draws]
            sd = statistics.stdev(values) if len(values) > 1 else math.nan
            moments.append((statistics.fmean(values), sd, len(values)))
            cells.append(f"{moments[-1][0]:.4f} ± {sd:.4f}")
        z = "n/a"
        if len(moments) == 2:
            (m1, s1, n1), (m2, s2, n2) = moments
            se = math.sqrt(s1**2 / n1 + s2**2 / n2)
            z = f"{(m1 - m2) / se:+.1f}" if se > 0 else "0" if m1 == m2 else "inf"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {z} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="click_parity", description=__doc__.split("\n\n")[0], epilog=__doc__
    )
    parity_sources.add_source_arguments(p)
    add_flag(p, "fold", default=1, help="the fold. Default: 1")
    add_flag(p, "split", default="train", choices=list(SPLITS), help="Default: train")
    p.add_argument("--draws", type=int, default=10, help="draws per side. Default: 10")
    add_flag(p, "seed", default=0, help="first draw's seed. Default: 0")
    args = p.parse_args(argv)
    if args.draws < 2:
        p.error(f"--draws must be >= 2 (a standard deviation needs two), got {args.draws}")
    path = parity_sources.fold_files(args, args.fold)[args.split]
    max_relevance = int(reference_runner.read_letor(path)["target"].max())
    sides = {
        "ours": our_draws(
            path, split=args.split, max_relevance=max_relevance, draws=args.draws, seed=args.seed
        )
    }
    setup = parity_sources.official_setup(args)
    if setup is None:
        print(parity_sources.SETUP)
    else:
        try:
            sides["released code"] = their_draws(setup, path, draws=args.draws, seed=args.seed)
        except RuntimeError as error:
            print(f"click_parity: {error}", file=sys.stderr)
            return 1
    title = (
        f"Click simulation on {args.dataset} Fold{args.fold} {args.split} (purchase label 4), "
        f"{args.draws} draws per side, seeds {args.seed}-{args.seed + args.draws - 1}; "
        "z: difference of the means over its standard error."
    )
    print(table(sides, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
