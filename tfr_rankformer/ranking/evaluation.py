"""Evaluating a Keras ranking model on whole lists with the shared ranking metrics, and
what evaluating a trained run takes (``RunEvaluator``)."""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfr_rankformer.core import elwc_schema
from tfr_rankformer.inputs.bucketed_batches import INDEX
from tfr_rankformer.inputs.data import MASK
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings

__all__ = ["predict_lists", "evaluate_model", "EvaluationCallback", "RunEvaluator"]


@dataclasses.dataclass(frozen=True)
class RunEvaluator:
    """A trained run, reloaded to be evaluated on one dataset (``runner.evaluate``).

    Each model family's ``evaluator`` makes one; the runner evaluates the
    splits asked for and records the results alike for every kind of run.

    Attributes:
      trained_on: the dataset the run trained on.
      data_dir: the dataset evaluated.
      splits: that dataset's splits.
      evaluate: ``evaluate(split)``: the split's metrics.
      check: ``check(splits)`` raises, before any metric is computed, when
        one of ``splits`` cannot be read whole; ``None``: nothing to check.
    """

    trained_on: str
    data_dir: str
    splits: list[str]
    evaluate: Callable[[str], dict]
    check: Callable[[list[str]], None] | None = None


# Kept beside the models, not on them: a function stored on a model would be
# tracked, and saved with it into SavedModels.
_PREDICT_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _predict_step(model: tf.keras.Model):
    """The model's inference call as one ``tf.function`` for any batch size and list
    length, made once per model (evaluation after every epoch reuses its trace)."""
    step = _PREDICT_STEPS.get(model)
    if step is None:
        num_features = next(i.shape[-1] for i in model.inputs if i.name.startswith("features"))
        signature = {
            elwc_schema.FEATURES: tf.TensorSpec([None, None, num_features], tf.float32),
            MASK: tf.TensorSpec([None, None], tf.bool),
        }
        # A weak reference: the function must not keep its model (its key) alive.
        ref = weakref.ref(model)
        step = tf.function(
            lambda inputs: ref()(inputs, training=False), input_signature=[signature]
        )
        _PREDICT_STEPS[model] = step
    return step


def predict_lists(model: tf.keras.Model, dataset: tf.data.Dataset) -> dict:
    """Runs ``model`` over an evaluation dataset (see ``data.evaluation_dataset``).

    Returns:
      Padded numpy arrays ``scores``, ``label``, ``relevance``, ``mask``
      (``[num_lists, max_list]``) and, for models with a list head,
      ``list_probs`` (``[num_lists, K]``, ``P(t >= k)``), with the lists in
      file order (batches grouped by length are put back in it).
    """
    step = _predict_step(model)
    parts: dict[str, list] = {
        "scores": [],
        "label": [],
        "relevance": [],
        "mask": [],
        "probs": [],
        "index": [],
    }
    for batch in dataset:
        if INDEX in batch:
            parts["index"].append(batch[INDEX].numpy())
        inputs = {elwc_schema.FEATURES: batch[elwc_schema.FEATURES], MASK: batch[MASK]}
        outputs = step(inputs)
        parts["scores"].append(outputs["scores"].numpy())
        parts["label"].append(batch[elwc_schema.LABEL].numpy())
        parts["relevance"].append(batch[elwc_schema.RELEVANCE].numpy())
        parts["mask"].append(batch[MASK].numpy())
        if "list_quality" in outputs:
            parts["probs"].append(tf.sigmoid(outputs["list_quality"]).numpy())
    if not parts["mask"]:
        raise ValueError("the evaluation split holds no lists")
    # Each batch's rows are written straight into their place in file order:
    # one array per field, no padded copies to concatenate and reorder.
    rows = sum(m.shape[0] for m in parts["mask"])
    width = max(m.shape[1] for m in parts["mask"])
    fills = {
        "scores": -np.inf,
        "label": elwc_schema.PADDING_LABEL,
        "relevance": elwc_schema.PADDING_LABEL,
        "mask": False,
    }
    result = {k: np.full((rows, width), v, dtype=parts[k][0].dtype) for k, v in fills.items()}
    if parts["probs"]:
        result["list_probs"] = np.empty((rows, parts["probs"][0].shape[1]), np.float32)
    start = 0
    for i, mask in enumerate(parts["mask"]):
        n, w = mask.shape
        where = parts["index"][i] if parts["index"] else np.arange(start, start + n)
        start += n
        for key in fills:
            result[key][where, :w] = parts[key][i]
        if parts["probs"]:
            result["list_probs"][where] = parts["probs"][i]
    return result


def evaluate_model(
    model: tf.keras.Model, dataset: tf.data.Dataset, *, max_label: int, list_head: bool
) -> dict:
    """The paper's metrics for ``model`` on ``dataset`` (NDCG x 100, list-head metrics)."""
    predicted = predict_lists(model, dataset)
    return evaluate_rankings(
        predicted["scores"],
        predicted["label"],
        predicted["relevance"],
        predicted["mask"],
        max_label=max_label,
        list_probs=predicted.get("list_probs") if list_head else None,
    )


# Validation metrics shown per epoch and written to history.csv.
LOGGED = ("ndcg_y@1", "ndcg_y@5", "ndcg_y@10", "ndcg_r@10", "ndcg_y@10_tmax", "list_auc_t>=1")


class EvaluationCallback(tf.keras.callbacks.Callback):
    """Adds validation metrics (``val_ndcg_y@10`` ...) to the logs after each epoch.

    Placed before checkpointing and early stopping, which then monitor them.
    """

    def __init__(
        self,
        dataset: tf.data.Dataset,
        *,
        max_label: int,
        list_head: bool,
        model: tf.keras.Model | None = None,
    ):
        super().__init__()
        self.dataset = dataset
        self.max_label = max_label
        self.list_head = list_head
        self.evaluated = model  # the model on raw features; default: the one being fit

    def on_epoch_end(self, epoch, logs=None):
        metrics = evaluate_model(
            self.evaluated or self.model,
            self.dataset,
            max_label=self.max_label,
            list_head=self.list_head,
        )
        if logs is not None:
            for key in LOGGED:
                if key in metrics:
                    logs[f"val_{key}"] = metrics[key]
