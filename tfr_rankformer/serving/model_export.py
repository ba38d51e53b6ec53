"""Exporting a Keras ranking model held in memory as a SavedModel for TF Serving.

``export.export_run`` exports a ``tfr-train`` run from its directory.
:func:`export_model` takes the model itself, e.g. one built with
``build_model`` and trained with ``fit`` on the user's own ``tf.data``
pipeline, and writes the same SavedModel: the ``serving_default`` (and
``predict``) signature on serialized ELWC protos, ``predict_tensors`` on raw
``features [batch, list, d] float32`` and ``mask [batch, list] bool``, the
in-graph item checks and TF Serving's warm-up requests (see ``export``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from tfr_rankformer.core import elwc_schema
from tfr_rankformer.inputs import data
from tfr_rankformer.serving import serving_checks
from tfr_rankformer.serving.export import save_servable

__all__ = ["export_model"]


def _model_io(model: tf.keras.Model) -> tuple[int, bool]:
    """The feature count ``d`` the model takes, and whether it has a list head."""
    inputs, outputs = model.input, model.output
    if not (
        isinstance(inputs, dict)
        and {elwc_schema.FEATURES, data.MASK} <= set(inputs)
        and isinstance(outputs, dict)
        and "scores" in outputs
    ):
        raise ValueError(
            f"export_model takes a model on {{'{elwc_schema.FEATURES}', '{data.MASK}'}} returning "
            "{'scores', ...}, as build_model makes; a text model (the Listformer) is exported "
            "from its run with export_run"
        )
    return int(inputs[elwc_schema.FEATURES].shape[-1]), "list_quality" in outputs


def _elwc(items: np.ndarray) -> bytes:
    """One list of raw feature vectors (``[n, d]``) as a serialized ELWC proto."""
    from tensorflow_serving.apis import input_pb2

    request = input_pb2.ExampleListWithContext()
    for vector in items:
        example = request.examples.add()
        example.features.feature[elwc_schema.FEATURES].float_list.value.extend(vector.tolist())
    return request.SerializeToString()


def _warmup_lists(lists, num_features: int) -> list[np.ndarray]:
    if lists is None:
        return [np.zeros((1, num_features), np.float32)]
    arrays = [np.asarray(items, np.float32) for items in lists]
    if not arrays:
        raise ValueError("`warmup_lists` holds no list; leave it None for the default request")
    for i, items in enumerate(arrays):
        if items.ndim != 2 or items.shape[0] == 0 or items.shape[1] != num_features:
            raise ValueError(
                f"`warmup_lists[{i}]` must be a non-empty [items, {num_features}] array, "
                f"got shape {items.shape}"
            )
        if not np.isfinite(items).all():
            raise ValueError(f"`warmup_lists[{i}]` holds NaN or an infinity")
    return arrays


def export_model(
    model: tf.keras.Model,
    path: str,
    *,
    warmup_lists: Sequence[np.ndarray] | None = None,
    invalid_items: str = "reject",
) -> str:
    """Saves ``model`` as a SavedModel with the serving signatures; returns ``path``.

    The model takes raw features (its normalisation is inside it, as
    ``build_model`` makes it), so a client sends the features as they are.
    The SavedModel is written under a temporary name beside ``path`` and renamed
    when complete.

    Args:
      model: a model on ``{"features": [B, L, d] float32, "mask": [B, L] bool}``
        returning ``{"scores": [B, L], ...}``; with a ``list_quality`` output
        the signatures also return ``list_probs`` and ``expected_list_label``.
      path: the SavedModel directory to create (for TF Serving, a numbered
        version directory such as ``export/1``).
      warmup_lists: a few lists of raw features, each a ``[items, d]`` float
        array, sent as TF Serving's warm-up requests; ``None``: one list of one
        all-zero item.
      invalid_items: what the signatures do with an item they cannot score:
        ``reject`` or ``score-last`` (see ``serving_checks``).

    Returns:
      ``path``.

    Raises:
      FileExistsError: if ``path`` exists.
      ValueError: for a model without the named inputs and outputs, bad
        ``warmup_lists`` or an unknown ``invalid_items`` policy.
    """
    serving_checks.check_policy(invalid_items)
    num_features, list_head = _model_io(model)
    warmup = [_elwc(items) for items in _warmup_lists(warmup_lists, num_features)]
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists; an export is never overwritten")
    parent, name = os.path.split(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    temporary = os.path.join(parent, f".{name}.partial")
    shutil.rmtree(temporary, ignore_errors=True)  # left by an export that was killed
    save_servable(
        model,
        temporary,
        num_features=num_features,
        list_head=list_head,
        warmup=warmup,
        invalid_items=invalid_items,
    )
    os.replace(temporary, path)
    return path
