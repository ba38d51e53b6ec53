"""Evaluating a Keras ranking model on whole lists with the shared ranking metrics, and
what evaluating a trained run takes (``RunEvaluator``)."""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.elwc_schema import FEATURES, LABEL, MASK, PADDING_LABEL, RELEVANCE
from tfr_rankformer.inputs.list_parsing import INDEX
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings


@dataclasses.dataclass(frozen=True)
class RunEvaluator:
    """A trained run to evaluate on ``data_dir``: ``evaluate(split)`` gives a split's
    metrics; ``check(splits)`` raises first when one cannot be read whole."""

    trained_on: str
    data_dir: str
    splits: list[str]
    evaluate: Callable[[str], dict]
    check: Callable[[list[str]], None] | None = None


# Beside the models, not on them: a function on a model would be saved with it.
_PREDICT_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def predict_step(model: tf.keras.Model):
    """The model's inference as one ``tf.function`` for any shape, traced once per model."""
    step = _PREDICT_STEPS.get(model)
    if step is None:
        signature = {k: tf.TensorSpec(i.shape, i.dtype) for k, i in model.input.items()}
        # A weak reference: the function must not keep its model (its key) alive.
        ref = weakref.ref(model)
        step = tf.function(
            lambda inputs: ref()(inputs, training=False), input_signature=[signature]
        )
        _PREDICT_STEPS[model] = step
    return step


def predict_lists(model: tf.keras.Model, dataset: tf.data.Dataset) -> dict:
    """``model`` over ``data.evaluation_dataset``: padded ``[num_lists, max_list]`` arrays
    (and ``list_probs`` ``[num_lists, K]``), the lists in file order."""
    step = predict_step(model)
    batches = []
    for batch in dataset:
        outputs = step({FEATURES: batch[FEATURES], MASK: batch[MASK]})
        arrays = {key: batch[key].numpy() for key in (LABEL, RELEVANCE, MASK, INDEX)}
        arrays["scores"] = outputs["scores"].numpy()
        if "list_quality" in outputs:
            arrays["list_probs"] = tf.sigmoid(outputs["list_quality"]).numpy()
        batches.append(arrays)
    if not batches:
        raise ValueError("the evaluation split holds no lists")
    # Each batch's rows are written straight into their place in file order.
    rows = sum(len(b[INDEX]) for b in batches)
    width = max(b[MASK].shape[1] for b in batches)
    fills = {"scores": -np.inf, LABEL: PADDING_LABEL, RELEVANCE: PADDING_LABEL, MASK: False}
    result = {k: np.full((rows, width), v, dtype=batches[0][k].dtype) for k, v in fills.items()}
    if "list_probs" in batches[0]:
        result["list_probs"] = np.empty((rows, batches[0]["list_probs"].shape[1]), np.float32)
    for b in batches:
        for key in fills:
            result[key][b[INDEX], : b[MASK].shape[1]] = b[key]
        if "list_probs" in result:
            result["list_probs"][b[INDEX]] = b["list_probs"]
    return result


def evaluate_model(
    model: tf.keras.Model, dataset: tf.data.Dataset, *, max_label: int, list_head: bool
) -> dict:
    """The paper's metrics for ``model`` on ``dataset`` (NDCG x 100, list-head metrics)."""
    predicted = predict_lists(model, dataset)
    probs = predicted.get("list_probs") if list_head else None
    arrays = (predicted[k] for k in ("scores", LABEL, RELEVANCE, MASK))
    return evaluate_rankings(*arrays, max_label=max_label, list_probs=probs)


# Validation metrics shown per epoch and written to history.csv.
LOGGED = ("ndcg_y@1", "ndcg_y@5", "ndcg_y@10", "ndcg_r@10", "ndcg_y@10_tmax", "list_auc_t>=1")


class EvaluationCallback(tf.keras.callbacks.Callback):
    """Adds validation metrics (``val_ndcg_y@10`` ...) to each epoch's logs."""

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
        model = self.evaluated or self.model
        metrics = evaluate_model(
            model, self.dataset, max_label=self.max_label, list_head=self.list_head
        )
        if logs is not None:
            logs.update({f"val_{key}": metrics[key] for key in LOGGED if key in metrics})
