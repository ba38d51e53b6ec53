"""``tfr-export``: export a trained run as a SavedModel for TF Serving.

Examples::

    tfr-export --model-dir runs/rankformer
    tfr-export --model-dir runs/rankformer --version 7
"""

from __future__ import annotations

import argparse
import sys

from pipelines.cli_common import make_parser
from pipelines.tf_log_level import add_verbose_flag, set_tensorflow_log_level

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = make_parser(
        "tfr-export",
        "Export a trained run (its best checkpoint) to MODEL_DIR/export/<version>/, "
        "the layout TF Serving loads. Signatures: serving_default (alias predict) takes "
        "serialized ExampleListWithContext protos ('examples', tf.string [batch]); "
        "predict_tensors takes raw 'features' [batch, list, d] and 'mask' [batch, list]. "
        "Both return 'scores' [batch, list] and, with a list head, 'list_probs' [batch, K] "
        "and 'expected_list_label' [batch]. Features are normalised inside the graph.",
        __doc__,
    )
    p.add_argument("--model-dir", required=True, help="a tfr-train output directory")
    p.add_argument(
        "--version", type=int, help="version number. Default: one more than the highest existing"
    )
    add_verbose_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    set_tensorflow_log_level(verbose=args.verbose)
    from tfr_rankformer.export import export_run

    try:
        path = export_run(args.model_dir, version=args.version)
    except (ValueError, FileNotFoundError, FileExistsError, OSError) as e:
        print(f"tfr-export: error: {e}", file=sys.stderr)
        return 1
    print(f"exported {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
