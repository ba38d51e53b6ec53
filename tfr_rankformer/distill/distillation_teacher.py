"""The teacher of a distillation: a GBDT directory, a tfr-train run's best checkpoint or
an exported SavedModel, loaded as one scoring function over ``ListArrays``."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.elwc_schema import MASK
from tfr_rankformer.core.run_layout import CONFIG_NAME
from tfr_rankformer.gbdt.gbdt_booster import is_gbdt_run, load_booster, score_arrays
from tfr_rankformer.inputs.list_arrays import ListArrays
from tfr_rankformer.serving.serving_requests import SIGNATURE_TENSORS
from tfr_rankformer.training.training_setup import load_run

__all__ = ["Teacher", "load_teacher"]


@dataclasses.dataclass
class Teacher:
    """A model that scores lists: ``kind`` is ``checkpoint``, ``saved_model`` or ``gbdt``;
    ``data`` and ``training_seconds`` are what its run recorded, if anything."""

    path: str
    kind: str
    data: str | None
    num_features: int
    score: Callable[[ListArrays], np.ndarray]
    training_seconds: float | None = None


def _padded_scorer(call, batch_size: int) -> Callable[[ListArrays], np.ndarray]:
    """Scores lists in batches through ``call(features [B, L, d], mask [B, L]) -> [B, L]``."""

    def score(arrays: ListArrays) -> np.ndarray:
        parts = []
        for start in range(0, arrays.num_lists, batch_size):
            part = arrays.slice_lists(start, min(start + batch_size, arrays.num_lists))
            mask = part.mask()
            scores = call(part.padded(part.features, 0.0), mask)
            parts.append(np.asarray(scores)[mask])
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    return score


def _recorded_seconds(model_dir: str) -> float | None:
    path = os.path.join(model_dir, "metrics.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("training", {}).get("seconds")


def load_teacher(path: str, *, batch_size: int = 256) -> Teacher:
    """Loads a teacher from ``path``; ``FileNotFoundError`` if it is none of the three."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"teacher {path}: no such directory")
    if is_gbdt_run(path):
        booster = load_booster(path)
        with open(os.path.join(path, CONFIG_NAME), encoding="utf-8") as f:
            trained_on = json.load(f).get("data")
        return Teacher(
            path,
            "gbdt",
            trained_on,
            booster.num_feature(),
            lambda arrays: score_arrays(booster, arrays),
            _recorded_seconds(path),
        )
    if os.path.isfile(os.path.join(path, "config.json")):
        config, manifest, model = load_run(path)
        d = manifest.num_features
        signature = {
            "features": tf.TensorSpec([None, None, d], tf.float32),
            MASK: tf.TensorSpec([None, None], tf.bool),
        }
        step = tf.function(
            lambda x: model(x, training=False)["scores"], input_signature=[signature]
        )

        def call(features, mask):
            return step({"features": tf.constant(features), MASK: tf.constant(mask)}).numpy()

        scorer = _padded_scorer(call, batch_size)
        return Teacher(path, "checkpoint", config.data, d, scorer, _recorded_seconds(path))
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        signature = tf.saved_model.load(path).signatures[SIGNATURE_TENSORS]
        d = signature.structured_input_signature[1]["features"].shape[-1]

        def call(features, mask):
            outputs = signature(features=tf.constant(features), mask=tf.constant(mask))
            return outputs["scores"].numpy()

        return Teacher(path, "saved_model", None, d, _padded_scorer(call, batch_size))
    raise FileNotFoundError(
        f"teacher {path} is not a model: expected a tfr-train run directory (config.json and "
        "checkpoints/), an exported SavedModel (saved_model.pb), or a GBDT directory (model.txt)"
    )
