"""A run directory's layout: the files a run writes, its state file, and whether it is a
text run.

Every ``tfr-train`` run writes ``config.json`` (its resolved settings),
``checkpoints/`` (the kept weights), ``history.csv``, ``logs/`` (TensorBoard)
and ``metrics.json``; a feature-vector run also keeps ``backup/`` while it
trains, a text run adds ``vocab.txt`` and ``text_model.json``; ``tfr-export``
adds ``export/<version>/``; ``run_state.json`` records the run's state (see
``run_directory``).

Whether a run is a text model's is decided here once, by its model's family
(``is_text_model``, from ``model_families``), for settings, run directories and their exports alike
(``is_text_run``: either of a text run's exports, the raw-string one or the
token-id one, ``is_token_id_export``); the runner picks the text or the
feature-vector implementation by it. No TensorFlow is imported unless an
export is read.

>>> is_text_model("listformer"), is_text_model("rankformer")
(True, False)
>>> BEST_WEIGHTS.replace(os.sep, "/")
'checkpoints/best'
"""

from __future__ import annotations

import json
import os

from tfr_rankformer.core import model_families

__all__ = [
    "BACKUP_NAME",
    "BEST_WEIGHTS",
    "CHECKPOINTS_NAME",
    "CONFIG_NAME",
    "EXPORT_NAME",
    "HISTORY_NAME",
    "LOGS_NAME",
    "METRICS_NAME",
    "RUN_STATES",
    "RUN_STATE_NAME",
    "TEXT_RUN_NAME",
    "TOKEN_ID_EXPORT_NAME",
    "VOCAB_NAME",
    "is_text_model",
    "is_text_run",
    "is_token_id_export",
    "run_model_name",
]

# === Files of every run ===
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

# === A text run's own files ===
VOCAB_NAME = "vocab.txt"  # the WordPiece vocabulary the model was trained with
TEXT_RUN_NAME = "text_model.json"  # what rebuilding the model needs besides config.json

# === The run's state ===
RUN_STATE_NAME = "run_state.json"
RUN_STATES = ("running", "failed", "complete")

# A text export's default signature takes these strings, a token-id export's
# these ids and mask (feature-vector exports take serialized ELWC ``examples``).
_TEXT_INPUTS = frozenset({"query", "documents"})
_TOKEN_ID_INPUTS = frozenset({"query_ids", "document_ids", "document_mask"})


def is_text_model(model: str) -> bool:
    """Whether the model named ``model`` ranks text lists (the Listformer) rather than
    feature vectors: the one rule ``TrainConfig.is_text`` and ``is_text_run`` apply
    (``model_families.is_text``)."""
    return model_families.is_text(model)


def run_model_name(model_dir: str) -> str | None:
    """The model named in ``model_dir/config.json`` (``None``: no readable one)."""
    try:
        with open(os.path.join(model_dir, CONFIG_NAME), encoding="utf-8") as f:
            settings = json.load(f)
    except (OSError, ValueError):
        return None
    model = settings.get("model") if isinstance(settings, dict) else None
    return model if isinstance(model, str) else None


def _default_inputs(export: str) -> list[frozenset]:
    """The input names of the SavedModel ``export``'s default signature (one set per
    graph that has it), read from ``saved_model.pb`` without loading the model."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(export, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    signatures = (graph.signature_def.get("serving_default") for graph in saved.meta_graphs)
    return [frozenset(s.inputs) for s in signatures if s is not None]


def _export_takes_text(export: str) -> bool:
    """Whether the SavedModel ``export``'s default signature takes text, as raw strings
    or as token ids."""
    return any(
        _TEXT_INPUTS <= inputs or _TOKEN_ID_INPUTS <= inputs for inputs in _default_inputs(export)
    )


def is_token_id_export(path: str) -> bool:
    """Whether ``path`` is a text run's token-id export (``export_token_ids/<version>``):
    a SavedModel whose default signature takes ``query_ids``, ``document_ids`` and
    ``document_mask``."""
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
        return False
    return any(_TOKEN_ID_INPUTS <= inputs for inputs in _default_inputs(path))


def is_text_run(path: str) -> bool:
    """Whether ``path`` holds a text model's run, or a SavedModel exported from one.

    A run directory is a text run when its ``config.json`` names a text model
    (``is_text_model``). An export carries no settings: it is a text model's
    when its default signature takes ``query`` and ``documents`` strings, or
    ``query_ids``, ``document_ids`` and ``document_mask`` (the token-id
    export), which only text models serve. Anything else (no run, a GBDT, a
    feature-vector run or export) is not.
    """
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return _export_takes_text(path)
    model = run_model_name(path)
    return model is not None and is_text_model(model)
