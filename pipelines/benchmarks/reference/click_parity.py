"""Our click simulation beside the RankFormer authors' released one, draw by draw.

Both sides simulate clicks and purchases (label 4) on one LETOR file ``--draws`` times; per
statistic of ``reference_runner.list_stats`` the table gives each side's mean ± standard
deviation over the draws and the difference of the means over its standard error (z).
"""

from __future__ import annotations

import json
import math
import statistics
import sys

import numpy as np

from pipelines.benchmarks.bench_support import parser
from pipelines.benchmarks.reference import parity_sources, reference_runner
from tfr_rankformer.core.elwc_schema import SPLITS


def our_draws(path: str, *, split: str, max_relevance: int, draws: int, seed: int) -> list[dict]:
    """``list_stats`` of ``draws`` runs of our simulation (as ``tfr-convert``'s) on ``path``."""
    from tfrecords_tools.click_simulation import ClickConfig, list_rng, simulate_clicks

    frame = reference_runner.read_letor(path)
    groups = [(int(qid), rows["target"].to_numpy()) for qid, rows in frame.groupby("qid")]
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
        labels, relevances = np.concatenate(labels), np.concatenate(relevances)
        results.append(
            {"seed": draw_seed, **reference_runner.list_stats(labels, relevances, offsets)}
        )
    return results


def table(sides: dict[str, list[dict]], title: str) -> str:
    """Markdown: per statistic, each side's mean ± standard deviation and ``z``."""
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
    p = parser(__doc__, prog="click_parity")
    parity_sources.add_source_arguments(p)
    p.add_argument("--fold", type=int, default=1, help="the fold")
    p.add_argument("--split", default="train", choices=list(SPLITS), help="the fold's file")
    p.add_argument("--draws", type=int, default=10, help="draws per side")
    p.add_argument("--seed", type=int, default=0, help="first draw's seed")
    args = p.parse_args(argv)
    if args.draws < 2:
        p.error(f"--draws must be >= 2 (a standard deviation needs two), got {args.draws}")
    path = parity_sources.fold_files(args, args.fold)[args.split]
    max_relevance = int(reference_runner.read_letor(path)["target"].max())
    draws = dict(draws=args.draws, seed=args.seed)
    sides = {"ours": our_draws(path, split=args.split, max_relevance=max_relevance, **draws)}
    setup = parity_sources.official_setup(args)
    if setup is not None:
        options = ["--train", path, "--seed", str(args.seed), "--click-stats", str(args.draws)]
        try:
            lines = parity_sources.run_released(setup, options, "the released simulation failed")
        except RuntimeError as error:
            print(f"click_parity: {error}", file=sys.stderr)
            return 1
        sides["released code"] = [json.loads(line) for line in lines if line.startswith("{")]
    title = (
        f"Click simulation on {args.dataset} Fold{args.fold} {args.split} (purchase label 4), "
        f"{args.draws} draws per side, seeds {args.seed}-{args.seed + args.draws - 1}; "
        "z: difference of the means over its standard error."
    )
    print(table(sides, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
