"""``tfr-eval``: evaluate a trained run with the paper's metrics.

Examples::

    tfr-eval --model-dir runs/rankformer
    tfr-eval --model-dir runs/rankformer --split all
    tfr-eval --model-dir runs/rankformer --data data/mq2008/Fold2 --split test
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from pipelines.cli_common import data_loss_message, format_metrics, make_parser
from pipelines.tf_log_level import add_verbose_flag, one_error_line, start_command
from pipelines.train_cli import REPORTED
from tfr_rankformer.core.config_io import add_options, setting


@dataclasses.dataclass(frozen=True)
class EvalOptions:
    """``tfr-eval``'s options."""

    model_dir: str = setting(None, "a tfr-train output directory", required=True)
    data: str | None = setting(None, "a converted dataset. Default: the one the run trained on")
    split: str = setting("test", "a split name, or 'all'")


def build_parser() -> argparse.ArgumentParser:
    p = make_parser(
        "tfr-eval",
        "Evaluate a trained run (its best checkpoint): NDCG@1/5/10 x 100 on the "
        "training labels (NDCG_y) and on the explicit relevance (NDCG_r), leaving out lists "
        "whose labels are all equal; NDCG_y@10 on lists whose list label is the highest; and "
        "accuracy and ROC-AUC of P(t >= 1), P(t >= 2) for models with a list head. Results "
        "are merged into MODEL_DIR/metrics.json.",
        __doc__,
    )
    add_options(p, EvalOptions)
    add_verbose_flag(p)
    return p


@one_error_line("tfr-eval")
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_command(args)
    from tfr_rankformer.runner import evaluate

    split = args.split or EvalOptions.split
    splits = None if split == "all" else [split]
    import tensorflow as tf

    try:
        results = evaluate(args.model_dir, data_dir=args.data, splits=splits)
    except tf.errors.DataLossError as e:
        where = args.data or f"the data of {args.model_dir}"
        print(f"tfr-eval: error: {data_loss_message(where, e)}", file=sys.stderr)
        return 1
    keys = REPORTED + ["list_acc_t>=1", "list_acc_t>=2", "list_auc_t>=2", "num_lists_y"]
    print(format_metrics(results, keys))
    print(next(iter(results.values()))["convention"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
