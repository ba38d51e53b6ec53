"""Exporting a trained run as a SavedModel that TF Serving loads.

``model_dir/export/<version>/`` (versions numbered 1, 2, ...) holds a SavedModel
with two signatures:

* ``serving_default`` (also ``predict``): ``examples``, a ``tf.string [batch]``
  of serialized ``ExampleListWithContext`` protos with raw feature values;
* ``predict_tensors``: ``features [batch, list, d] float32`` (raw) and
  ``mask [batch, list] bool``.

Both return ``scores [batch, list]`` (padding items score ``PADDING_SCORE``)
and, for models with a list head, ``list_probs [batch, K]`` (``P(t >= k)``)
and ``expected_list_label [batch]`` (``E[t] = sum_k P(t >= k)``). Lists of any
length work: the proto signature pads each batch to its longest list.

Items are checked in the graph (``serving_checks``): an item whose
``features`` field is missing, holds another number of values than ``d``, or
holds NaN or an infinity fails the request with a message naming the list,
the item, the field and the expected and found length (or the bad value) --
or, exported with ``invalid_items="score-last"``, gets the padding score and
is flagged in an extra ``invalid_items [batch, list] bool`` output.
``assets.extra/tf_serving_warmup_requests`` holds a few real requests.
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfr_rankformer.core import elwc_schema
from tfr_rankformer.core.run_layout import is_text_run
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.serving import serving_checks
from tfr_rankformer.serving.export_versions import next_version, write_version
from tfr_rankformer.training.training_setup import load_run

__all__ = [
    "export_run",
    "save_servable",
    "next_version",
    "SIGNATURE_ELWC",
    "SIGNATURE_TENSORS",
    "INVALID_ITEMS",
]

SIGNATURE_ELWC = "serving_default"
SIGNATURE_TENSORS = "predict_tensors"
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# The extra output of exports with the ``score-last`` policy.
INVALID_ITEMS = "invalid_items"


class _Servable(tf.Module):
    """The model behind the two serving signatures."""

    def __init__(self, model: tf.keras.Model, num_features: int, list_head: bool, policy: str):
        super().__init__()
        self.model = model
        self.num_features = num_features
        self.list_head = list_head
        self.policy = serving_checks.check_policy(policy)
        self.serve_examples = tf.function(
            self._serve_examples,
            input_signature=[tf.TensorSpec([None], tf.string, name="examples")],
        )
        self.serve_tensors = tf.function(
            self._serve_tensors,
            input_signature=[
                tf.TensorSpec([None, None, num_features], tf.float32, name="features"),
                tf.TensorSpec([None, None], tf.bool, name="mask"),
            ],
        )

    def _serve_examples(self, examples):
        import tensorflow_ranking as tfr

        # Parsed with variable length (no default value), so a missing or
        # short field is seen as such instead of being filled in; the context
        # is not parsed: scoring needs none of it.
        parsed = tfr.data.parse_from_example_list(
            examples,
            list_size=None,
            context_feature_spec={},
            example_feature_spec={elwc_schema.FEATURES: tf.io.VarLenFeature(tf.float32)},
            mask_feature_name=data.MASK,
        )
        sparse = parsed[elwc_schema.FEATURES]  # [B, L, W] sparse
        lengths = serving_checks.item_lengths(sparse)  # [B, L]
        features, mask, invalid = serving_checks.checked_items(
            serving_checks.dense_features(sparse, self.num_features, lengths),  # [B, L, d]
            parsed[data.MASK],
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
        outputs = self.model({elwc_schema.FEATURES: features, data.MASK: mask}, training=False)
        served = {"scores": outputs["scores"]}
        if self.list_head:
            probs = tf.sigmoid(tf.cast(outputs["list_quality"], tf.float32))  # [B, K]
            served["list_probs"] = probs
            served["expected_list_label"] = tf.reduce_sum(probs, axis=-1)  # [B]
        if invalid is not None:
            served[INVALID_ITEMS] = invalid
        return served


def _warmup_requests(path: str, examples: list[bytes], signature: str) -> None:
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for size in sorted({1, min(4, len(examples)), len(examples)}):
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(signature_name=signature),
            )
            request.inputs["examples"].CopyFrom(tf.make_tensor_proto(examples[:size]))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())


def _sample_requests(config, manifest: Manifest, count: int = 8) -> list[bytes]:
    """A few serialized lists of the run's data, for the warm-up requests."""
    split = "test" if "test" in manifest.splits else next(iter(manifest.splits))
    files = manifest.split_files(config.data, split)
    return [record.numpy() for record in tf.data.TFRecordDataset(files).take(count)]


def export_run(model_dir: str, *, version: int | None = None, invalid_items: str = "reject") -> str:
    """Exports a feature-vector run's best weights to ``model_dir/export/<version>``;
    returns that path.

    ``runner.export_run`` exports any run; a text run's export is ``text_export``'s.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained run.
      FileExistsError: if the version directory exists.
      ValueError: for an unknown ``invalid_items`` policy, or a text run.
    """
    serving_checks.check_policy(invalid_items)
    if is_text_run(model_dir):
        raise ValueError(
            f"{model_dir} holds a text run: export it with runner.export_run (tfr-export)"
        )
    config, manifest, model = load_run(model_dir)

    def save(path: str) -> None:
        save_servable(
            model,
            path,
            num_features=manifest.num_features,
            list_head=config.uses_list_head,
            warmup=_sample_requests(config, manifest),
            invalid_items=invalid_items,
        )

    return write_version(model_dir, version, save)


def save_servable(
    model: tf.keras.Model,
    path: str,
    *,
    num_features: int,
    list_head: bool,
    warmup: list[bytes],
    invalid_items: str = "reject",
) -> None:
    """Saves ``model`` (raw features in) with the serving signatures and warm-up requests.

    ``invalid_items`` is the policy for items the signatures cannot score (see
    ``serving_checks``).
    """
    servable = _Servable(model, num_features, list_head, invalid_items)
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
