"""``tfr-distill``: distil a trained ranker into a pointwise LightGBM student.

Examples::

    tfr-distill --teacher runs/rankformer --output runs/student --trees 2000
    tfr-distill --teacher runs/rankformer/export/1 --data data/mq2008/Fold1 --output runs/student
    tfr-distill --teacher runs/rankformer --output runs/student_graded --target graded
"""

from __future__ import annotations

import argparse
import dataclasses
import math

from pipelines.cli_common import LightGBMOptions, aligned, make_parser, parse_lgb_params
from pipelines.tf_log_level import Display, one_error_line, start_command
from tfr_rankformer.core.command_names import DISTILL_ROWS, GBDT_PRESET_NAMES
from tfr_rankformer.core.config_io import add_options, given, load_settings, setting

_COLUMNS = ("ndcg_y@1", "ndcg_y@5", "ndcg_y@10", "ndcg_r@10")
_NAMES = {"teacher": "teacher", "student": "student", "gbdt_labels": "GBDT on labels"}


@dataclasses.dataclass(frozen=True)
class DistillOptions:
    """``tfr-distill``'s options (``DistillConfig``'s fields, whose module loads LightGBM)."""

    teacher: str | None = setting(None, "a tfr-train run directory, export/<version>, or GBDT")
    output: str | None = setting(None, "where the student goes (must not exist unless --overwrite)")
    data: str | None = setting(
        None,
        "a converted dataset. Default: the teacher's training data (an exported SavedModel "
        "does not record it)",
    )
    config: str | None = setting(
        None, "JSON file of settings (DistillConfig fields); flags override"
    )
    trees: int = setting(2000, "trees of the student and the label GBDT")
    target: str = setting(
        "scores",
        "scores: regression on the teacher's scores centred per list; graded: lambdarank on "
        "grades from the teacher's ranking of each list",
        choices=["scores", "graded"],
    )
    grades: int = setting(5, "grade levels of --target graded")
    preset: str = setting(
        "gbdt-1k",
        "LightGBM settings of both GBDTs (gbdt: LightGBM's usual lambdarank settings; "
        "gbdt-1k, gbdt-10k: the paper's Table 5)",
        choices=sorted(GBDT_PRESET_NAMES),
    )
    seed: int = setting(0, "LightGBM's seed")
    batch_size: int = setting(256, "lists per teacher call")
    overwrite: bool = setting(False, "replace --output")


def build_parser() -> argparse.ArgumentParser:
    p = make_parser(
        "tfr-distill",
        "Score every training list with a teacher (a tfr-train run's best checkpoint, an "
        "exported SavedModel, or a GBDT), train a LightGBM student on the teacher's scores, "
        "train a GBDT with identical settings on the labels, and compare the three on the "
        "held-out splits (console table and OUTPUT/metrics.json). The student is pointwise: "
        "it serves wherever a LightGBM model runs.",
        __doc__,
    )
    first = ("teacher", "output", "data", "config", "trees", "target", "grades", "preset")
    add_options(p, DistillOptions, only=first)
    add_options(
        p,
        LightGBMOptions,
        skip=("trees",),
        overrides={"early_stopping_rounds": {"help": _EARLY_STOPPING}},
    )
    add_options(p, DistillOptions, only=("seed", "batch_size", "overwrite"))
    add_options(p, Display, only=("log_level", "verbose"))
    return p


_EARLY_STOPPING = (
    "stop when the validation score has not improved for this many trees, keeping the best "
    "tree count (0: never; the whole budget is kept). Default: 100"
)


def _cell(value, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def format_comparison(comparison: dict[str, dict]) -> str:
    """One table per held-out split: teacher, student and label GBDT as rows."""
    header = ["model", *_COLUMNS, "train s", "ms/list"]
    blocks = []
    for split, rows in comparison.items():
        table = [header]
        for name in DISTILL_ROWS:
            m = rows[name]
            table.append(
                [_NAMES[name]]
                + [_cell(m.get(k), 2) for k in _COLUMNS]
                + [_cell(m.get("training_seconds"), 1), _cell(m.get("scoring_ms_per_list"), 3)]
            )
        blocks.append("\n".join([f"{split}:", *aligned(table, left=True)]))
    return "\n\n".join(blocks)


@one_error_line("tfr-distill")
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_command(args)
    from tfr_rankformer.distill.distillation import DistillConfig, distill

    flags = {**given(args, DistillOptions), **given(args, LightGBMOptions)}
    flags.pop("config", None)
    flags.pop("lgb_param", None)
    values = {**(load_settings(args.config, DistillConfig) if args.config else {}), **flags}
    params = {**values.pop("params", {}), **parse_lgb_params(args.lgb_param)}
    config = DistillConfig.from_json({**values, "params": params})
    metrics = distill(config)
    print(format_comparison(metrics["comparison"]))
    for split, fidelity in metrics["fidelity"].items():
        print(
            f"{split}: Spearman correlation of student and teacher scores within lists, "
            f"mean over lists: {fidelity['spearman_student_teacher']:.3f} "
            f"(label GBDT and teacher: {fidelity['spearman_label_gbdt_teacher']:.3f})"
        )
    first = next(iter(metrics["comparison"].values()), None)
    if first:
        print(first["student"]["convention"])
    print(f"wrote {config.output} (student: model.txt; label GBDT: gbdt_labels/)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
