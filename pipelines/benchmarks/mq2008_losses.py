"""The context-aware ranker with every registered loss on MQ2008's original labels.

Converts MQ2008 without click simulation (the labels are the explicit
relevance 0-2), trains ``context_aware`` (allRank's preset: d_fc 144, 4
blocks, 2 heads, feed-forward 512, dropout 0.4) once per loss on one fold
with the same budget, lists padded to the fold's longest list, and prints test
NDCG@5 and NDCG@10 (x 100, lists whose labels are all equal left out) as a
Markdown table, best first. Pobrotyn et al. report on MSLR-WEB30K the ordinal
loss and NDCG-Loss2++ at the top and RankNet and ListMLE at the bottom.

Run: ``python -m pipelines.benchmarks.mq2008_losses --output results/mq2008_losses``
(MQ2008 is looked up under --data-dir, $TFR_DATA_DIR and the working directory).
"""

from __future__ import annotations

import json
import os
import sys

from pipelines.benchmarks.mq2008_quality import convert_folds, fold_parser, train_fold
from tfr_rankformer.inputs import data
from tfr_rankformer.ranking.losses import SCORE_LOSSES


def main(argv: list[str] | None = None) -> int:
    parser = fold_parser(__doc__.split("\n\n")[0], "epoch budget of every loss")
    parser.set_defaults(output="results/mq2008_losses", folds="1", epochs=30, batch_size=32)
    parser.add_argument("--losses", default=",".join(SCORE_LOSSES))
    args = parser.parse_args(argv)

    converted = convert_folds(args.output, args.data_dir, args.seed, simulate=False)
    if converted is None:
        return 1
    results = {}
    for fold in (int(f) for f in args.folds.split(",")):
        fold_data = os.path.join(converted, f"Fold{fold}")
        longest = data.load_manifest(fold_data).split("train").longest_list
        for loss in args.losses.split(","):
            settings = {"model": "context_aware", "loss": loss, "list_size": longest}
            model_dir = train_fold(args, converted, fold, loss, settings)
            metrics_path = os.path.join(model_dir, "metrics.json")
            with open(metrics_path, encoding="utf-8") as f:
                results.setdefault(loss, []).append(json.load(f)["test"])

    print(
        f"\nMQ2008 original labels, folds {args.folds}, context_aware, {args.epochs} epochs, "
        f"batch {args.batch_size}: test NDCG x 100 (mean over folds)\n"
    )
    print("| loss | NDCG@5 | NDCG@10 |")
    print("|---|---|---|")
    rows = []
    for loss, runs in results.items():
        five = sum(r["ndcg_y@5"] for r in runs) / len(runs)
        ten = sum(r["ndcg_y@10"] for r in runs) / len(runs)
        rows.append((ten, five, loss))
    for ten, five, loss in sorted(rows, reverse=True):
        print(f"| {loss} | {five:.2f} | {ten:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
