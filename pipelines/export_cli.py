"""``tfr-export``: export a trained run as a SavedModel for TF Serving.

Examples::

    tfr-export --model-dir runs/rankformer
    tfr-export --model-dir runs/rankformer --version 7
    tfr-export --model-dir runs/rankformer --invalid-items score-last
    # a Listformer: export/<version>/ (raw text) and export_token_ids/<version>/
    tfr-export --model-dir runs/listformer
"""

from __future__ import annotations

import argparse
import dataclasses
import os

from pipelines.cli_common import make_parser
from pipelines.tf_log_level import add_verbose_flag, one_error_line, start_command
from tfr_rankformer.core.command_names import INVALID_ITEM_POLICIES
from tfr_rankformer.core.config_io import add_options, from_args, setting


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """``tfr-export``'s options."""

    model_dir: str = setting(None, "a tfr-train output directory", required=True)
    version: int | None = setting(
        None, "version number. Default: one more than the highest existing"
    )
    invalid_items: str = setting(
        "reject",
        "what the signatures do with an item they cannot score (features missing, of the "
        "wrong length, or NaN/inf): 'reject' fails the request with a message naming the "
        "list, item, field and the expected and found length (or the value); 'score-last' "
        "gives such items the padding score (-1e9, ranked last) and adds an 'invalid_items' "
        "[batch, list] output",
        choices=INVALID_ITEM_POLICIES,
    )
    precision: str = setting(
        "float32",
        "what a text run's exports compute in: bf16 is faster on CPUs with bfloat16 "
        "instructions (avx512_bf16, AMX) and emulated, slower, on others; weights and scores "
        "stay float32 (feature-vector exports compute in float32)",
        choices=("float32", "bf16"),
    )


def build_parser() -> argparse.ArgumentParser:
    p = make_parser(
        "tfr-export",
        "Export a trained run (its best checkpoint) to MODEL_DIR/export/<version>/, "
        "the layout TF Serving loads. Signatures: serving_default (alias predict) takes "
        "serialized ExampleListWithContext protos ('examples', tf.string [batch]); "
        "predict_tensors takes raw 'features' [batch, list, d] and 'mask' [batch, list]. "
        "Both return 'scores' [batch, list] and, with a list head, 'list_probs' [batch, K] "
        "and 'expected_list_label' [batch]. Features are normalised inside the graph. "
        "Items whose 'features' are missing, of another length than the model's, or hold "
        "NaN/inf fail the request with a message naming the list, item, field and lengths "
        "(or value), unless --invalid-items score-last. A text run (the Listformer) gets "
        "two SavedModels of the same version: MODEL_DIR/export/<version>/ takes raw strings "
        "('query' [batch], 'documents' [batch, list]) and needs a server with TF Text's ops; "
        "MODEL_DIR/export_token_ids/<version>/ takes WordPiece ids ('query_ids', "
        "'document_ids', 'document_mask'), holds core TF ops only, and carries "
        "assets.extra/vocab.txt and tokenizer.json for the client's tokenizer "
        "(docs/serving.md). A Listformer trained with the first stage's score takes "
        "'first_stage_scores' (float32 [batch, list]) in every signature as well.",
        __doc__,
    )
    add_options(p, ExportOptions)
    add_verbose_flag(p)
    return p


@one_error_line("tfr-export")
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start_command(args)
    options = from_args(args, ExportOptions)
    from tfr_rankformer.runner import export_run

    path = export_run(**dataclasses.asdict(options))
    print(exported_line(options.model_dir, path, f" (invalid items: {options.invalid_items})"))
    return 0


def exported_line(model_dir: str, path: str, detail: str = "") -> str:
    """What a command says of the export at ``path``; a text run's names its token-id twin."""
    from tfr_rankformer.core.run_layout import TOKEN_ID_EXPORT_NAME, is_text_run

    token_ids = os.path.join(model_dir, TOKEN_ID_EXPORT_NAME, os.path.basename(path))
    if is_text_run(model_dir) and os.path.isdir(token_ids):
        return f"exported {path} (raw text) and {token_ids} (token ids, no TF Text op)"
    return f"exported {path}{detail}"


if __name__ == "__main__":
    raise SystemExit(main())
