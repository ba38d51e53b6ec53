"""A run directory's layout, and whether a run or an export is a text model's."""

from __future__ import annotations

import json
import os

from tfr_rankformer.core import model_families

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.json"
HISTORY_NAME = "history.csv"
LOGS_NAME = "logs"
CHECKPOINTS_NAME = "checkpoints"
BEST_WEIGHTS = os.path.join(CHECKPOINTS_NAME, "best")
EXPORT_NAME = "export"  # export/<version>/, one SavedModel each
# A text run's second export, taking token ids (no TF Text op): a model base path of its own.
TOKEN_ID_EXPORT_NAME = "export_token_ids"
# A feature-vector run's backup for resuming, emptied once training completes.
BACKUP_NAME = "backup"

VOCAB_NAME = "vocab.txt"  # the WordPiece vocabulary the model was trained with
TEXT_RUN_NAME = "text_model.json"  # what rebuilding the model needs besides config.json

RUN_STATE_NAME = "run_state.json"
RUN_STATES = ("running", "failed", "complete")

# The inputs of a text export's default signature, and of a token-id export's.
_TEXT_INPUTS = frozenset({"query", "documents"})
_TOKEN_ID_INPUTS = frozenset({"query_ids", "document_ids", "document_mask"})


def _default_inputs(export: str) -> list[frozenset]:
    """The input names of ``export``'s default signature per graph, without loading it."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    signatures = (graph.signature_def.get("serving_default") for graph in saved.meta_graphs)
    return [frozenset(s.inputs) for s in signatures if s is not None]


def read_json(path: str) -> dict:
    """The JSON object in ``path``; ``{}`` when unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def is_token_id_export(path: str) -> bool:
    """Whether ``path`` is a text run's token-id export (``export_token_ids/<version>``)."""
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        return False
    return any(_TOKEN_ID_INPUTS <= inputs for inputs in _default_inputs(path))


def is_text_run(path: str) -> bool:
    """Whether ``path`` is a text model's run or an export that takes text or token ids."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        signatures = _default_inputs(path)
        return any(_TEXT_INPUTS <= s or _TOKEN_ID_INPUTS <= s for s in signatures)
    return model_families.is_text(read_json(os.path.join(path, CONFIG_NAME)).get("model"))
