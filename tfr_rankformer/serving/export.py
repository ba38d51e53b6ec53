"""A feature-vector model as a SavedModel for TF Serving, in ``model_dir/export/<version>/``.

Signatures: ``serving_default`` (also ``predict``) on ``examples`` (serialized ELWC, raw
features) and ``predict_tensors`` on ``features [B, L, d] float32`` and ``mask [B, L] bool``,
returning ``scores [B, L]`` and, with a list head, ``list_probs`` and ``expected_list_label``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from tfr_rankformer.core import elwc_schema, fault_points
from tfr_rankformer.core.atomic_files import atomic_path
from tfr_rankformer.core.elwc_schema import MASK
from tfr_rankformer.core.run_layout import EXPORT_NAME, is_text_run
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.serving import serving_checks
from tfr_rankformer.serving.serving_requests import (
    SIGNATURE_ELWC,
    SIGNATURE_TENSORS,
    elwc_records,
    grpc_elwc_request,
)
from tfr_rankformer.training.training_setup import load_run

__all__ = [
    "INVALID_ITEMS",
    "export_model",
    "export_run",
    "next_version",
    "save_servable",
    "served_outputs",
    "serve_nonempty",
    "write_version",
]

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# The extra output of exports with the ``score-last`` policy.
INVALID_ITEMS = "invalid_items"


def served_outputs(outputs: dict, list_head: bool) -> dict:
    """``scores`` and, with a list head, ``list_probs [B, K]`` and ``expected_list_label [B]``."""
    served = {"scores": outputs["scores"]}
    if list_head:
        probs = tf.sigmoid(tf.cast(outputs["list_quality"], tf.float32))  # [B, K]
        served["list_probs"] = probs
        served["expected_list_label"] = tf.reduce_sum(probs, axis=-1)  # [B]
    return served


def serve_nonempty(serve: Callable[[tf.Tensor], dict], examples: tf.Tensor) -> dict:
    """``serve(examples)`` for ``examples [B]``, also ``B = 0`` (proto parsing refuses it)."""
    count = tf.shape(examples)[0]
    padded = tf.concat([examples, tf.fill([tf.maximum(1 - count, 0)], "")], axis=0)
    return {name: value[:count] for name, value in serve(padded).items()}


class _Servable(tf.Module):
    """The model behind the two serving signatures."""

    def __init__(self, model, num_features: int, list_head: bool, policy: str, max_items: int = 0):
        super().__init__()
        self.model = model
        # Saved with the export, so that tfr-predict refuses longer lists before scoring.
        self.max_list_items = tf.Variable(max_items, trainable=False, dtype=tf.int32)
        self.num_features = num_features
        self.list_head = list_head
        self.policy = serving_checks.check_policy(policy)
        self.serve_examples = tf.function(
            lambda examples: serve_nonempty(self._score_examples, examples),
            input_signature=[tf.TensorSpec([None], tf.string, name="examples")],
        )
        self.serve_tensors = tf.function(
            self._serve_tensors,
            input_signature=[
                tf.TensorSpec([None, None, num_features], tf.float32, name="features"),
                tf.TensorSpec([None, None], tf.bool, name="mask"),
            ],
        )

    def _score_examples(self, examples):
        import tensorflow_ranking as tfr

        # Variable length (no default), so that a missing or short field is seen as such.
        parsed = tfr.data.parse_from_example_list(
            examples,
            list_size=None,
            context_feature_spec={},
            example_feature_spec={elwc_schema.FEATURES: tf.io.VarLenFeature(tf.float32)},
            mask_feature_name=MASK,
        )
        sparse = parsed[elwc_schema.FEATURES]  # [B, L, W] sparse
        lengths = serving_checks.item_lengths(sparse)  # [B, L]
        features, mask, invalid = serving_checks.checked_items(
            serving_checks.dense_features(sparse, self.num_features, lengths),  # [B, L, d]
            parsed[MASK],
            lengths,
            num_features=self.num_features,
            policy=self.policy,
        )
        return self._score(features, mask, invalid)

    def _serve_tensors(self, features, mask):
        features, mask, invalid = serving_checks.checked_tensors(
            features, mask, num_features=self.num_features, policy=self.policy
        )
        return self._score(features, mask, invalid)

    def _score(self, features, mask, invalid):
        outputs = self.model({elwc_schema.FEATURES: features, MASK: mask}, training=False)
        served = served_outputs(outputs, self.list_head)
        if invalid is not None:
            served[INVALID_ITEMS] = invalid
        return served


def _warmup_requests(path: str, examples: list[bytes], signature: str) -> None:
    from tensorflow_serving.apis import prediction_log_pb2

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for size in sorted({1, min(4, len(examples)), len(examples)}):
            request = grpc_elwc_request(examples[:size], model_name="", signature_name=signature)
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())


def save_servable(
    model: tf.keras.Model,
    path: str,
    *,
    num_features: int,
    list_head: bool,
    warmup: list[bytes],
    invalid_items: str = "reject",
    max_items: int = 0,
) -> None:
    """Saves ``model`` with the signatures; ``max_items``: the most items a list holds (0: any)."""
    servable = _Servable(model, num_features, list_head, invalid_items, max_items)
    tf.saved_model.save(
        servable,
        path,
        signatures={
            SIGNATURE_ELWC: servable.serve_examples,
            "predict": servable.serve_examples,
            SIGNATURE_TENSORS: servable.serve_tensors,
        },
    )
    _warmup_requests(os.path.join(path, WARMUP_FILE), warmup, SIGNATURE_ELWC)


# === A run's versions ===


def next_version(export_dir: str) -> int:
    """One more than the highest numbered version directory (1 for none)."""
    if not os.path.isdir(export_dir):
        return 1
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    return max(versions, default=0) + 1


def write_version(
    model_dir: str,
    version: int | None,
    save: Callable[[str], None],
    *,
    export_name: str = EXPORT_NAME,
) -> str:
    """``save(path)`` writes ``model_dir/<export_name>/<version>``; returns that path."""
    export_dir = os.path.join(model_dir, export_name)
    path = os.path.join(export_dir, str(version or next_version(export_dir)))
    return _save_new(path, save, "export versions are never overwritten")


def _save_new(path: str, save: Callable[[str], None], refusal: str) -> str:
    """``save(temporary)``, renamed to ``path`` once complete; ``FileExistsError`` if it exists."""
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists; {refusal}")
    with atomic_path(path) as temporary:
        save(temporary)
        fault_points.reached("export.saved")
    return path


def _sample_requests(config, manifest: Manifest, count: int = 8) -> list[bytes]:
    """A few serialized lists of the run's data, for the warm-up requests."""
    split = "test" if "test" in manifest.splits else next(iter(manifest.splits))
    files = manifest.split_files(config.data, split)
    return [record.numpy() for record in tf.data.TFRecordDataset(files).take(count)]


def export_run(model_dir: str, *, version: int | None = None, invalid_items: str = "reject") -> str:
    """Exports a feature-vector run's best weights to ``model_dir/export/<version>``."""
    serving_checks.check_policy(invalid_items)
    if is_text_run(model_dir):
        raise ValueError(
            f"{model_dir} holds a text run: export it with runner.export_run (tfr-export)"
        )
    config, manifest, model = load_run(model_dir)
    limit = config.architecture.list_limit()

    save = functools.partial(
        save_servable,
        model,
        num_features=manifest.num_features,
        list_head=config.uses_list_head,
        warmup=_sample_requests(config, manifest),
        invalid_items=invalid_items,
        max_items=limit.items if limit else 0,
    )
    return write_version(model_dir, version, save)


# === A model held in memory ===


def _model_io(model: tf.keras.Model) -> tuple[int, bool]:
    """The feature count ``d`` the model takes, and whether it has a list head."""
    inputs, outputs = model.input, model.output
    takes = isinstance(inputs, dict) and {elwc_schema.FEATURES, MASK} <= set(inputs)
    if not (takes and isinstance(outputs, dict) and "scores" in outputs):
        raise ValueError(
            f"export_model takes a model on {{'{elwc_schema.FEATURES}', '{MASK}'}} returning "
            "{'scores', ...}, as build_model makes; a text model (the Listformer) is exported "
            "from its run with export_run"
        )
    return int(inputs[elwc_schema.FEATURES].shape[-1]), "list_quality" in outputs


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
    """Saves a model held in memory (raw ``features`` and ``mask`` in, ``scores`` out) as
    :func:`export_run` saves a run's; ``warmup_lists``: ``[items, d]`` warm-up requests."""
    serving_checks.check_policy(invalid_items)
    num_features, list_head = _model_io(model)
    lists = [(0, [""] * len(items), items) for items in _warmup_lists(warmup_lists, num_features)]
    warmup = elwc_records(lists, num_features)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    options = dict(num_features=num_features, list_head=list_head, invalid_items=invalid_items)
    save = functools.partial(save_servable, model, warmup=warmup, **options)
    return _save_new(path, save, "an export is never overwritten")
