"""The teacher of a distillation: a GBDT directory, a tfr-train run's best checkpoint or
an exported SavedModel, loaded as one scoring function over ``ListArrays``."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.config_io import read_settings
from tfr_rankformer.core.elwc_schema import MASK
from tfr_rankformer.core.run_layout import CONFIG_NAME, METRICS_NAME
from tfr_rankformer.gbdt.gbdt_booster import is_gbdt_run, load_booster, score_arrays
from tfr_rankformer.inputs.list_arrays import ListArrays
from tfr_rankformer.serving.serving_requests import SIGNATURE_TENSORS
from tfr_rankformer.training.training_setup import load_run


@dataclasses.dataclass
class Teacher:
    """A model that scores lists, and what its run recorded (``data``, ``training_seconds``)."""

    path: str
    kind: str
    data: str | None
    num_features: int
    score: Callable[[ListArrays], np.ndarray]
    training_seconds: float | None = None


def _padded_scorer(call, batch_size: int) -> Callable[[ListArrays], np.ndarray]:
    """Scores lists in batches through ``call(features, mask) -> {'scores': [B, L], ...}``."""

    def score(arrays: ListArrays) -> np.ndarray:
        parts = []
        for start in range(0, arrays.num_lists, batch_size):
            part = arrays.slice_lists(start, min(start + batch_size, arrays.num_lists))
            mask = part.mask()
            outputs = call(tf.constant(part.padded(part.features, 0.0)), tf.constant(mask))
            parts.append(outputs["scores"].numpy()[mask])
        return np.concatenate(parts) if parts else np.zeros(0, np.float32)

    return score


def _recorded_seconds(model_dir: str) -> float | None:
    path = os.path.join(model_dir, METRICS_NAME)
    return read_settings(path).get("training", {}).get("seconds") if os.path.isfile(path) else None


def load_teacher(path: str, *, batch_size: int = 256) -> Teacher:
    """Loads a teacher from ``path``; ``FileNotFoundError`` if it is none of the three."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"teacher {path}: no such directory")
    if is_gbdt_run(path):
        booster = load_booster(path)
        trained_on = read_settings(os.path.join(path, CONFIG_NAME)).get("data")
        scorer = functools.partial(score_arrays, booster)
        seconds = _recorded_seconds(path)
        return Teacher(path, "gbdt", trained_on, booster.num_feature(), scorer, seconds)
    if os.path.isfile(os.path.join(path, CONFIG_NAME)):
        config, manifest, model = load_run(path)
        d = manifest.num_features
        specs = [tf.TensorSpec([None, None, d], tf.float32), tf.TensorSpec([None, None], tf.bool)]
        step = tf.function(
            lambda features, mask: model({"features": features, MASK: mask}, training=False),
            input_signature=specs,
        )
        scorer = _padded_scorer(step, batch_size)
        return Teacher(path, "checkpoint", config.data, d, scorer, _recorded_seconds(path))
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        signature = tf.saved_model.load(path).signatures[SIGNATURE_TENSORS]
        d = signature.structured_input_signature[1]["features"].shape[-1]
        scorer = _padded_scorer(lambda f, m: signature(features=f, mask=m), batch_size)
        return Teacher(path, "saved_model", None, d, scorer)
    raise FileNotFoundError(
        f"teacher {path} is not a model: expected a tfr-train run directory (config.json and "
        "checkpoints/), an exported SavedModel (saved_model.pb), or a GBDT directory (model.txt)"
    )
