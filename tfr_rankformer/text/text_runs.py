"""A text model's inputs, its evaluation, and reloading a trained text run from its
``text_model.json`` (``label_levels``; after ``--init-from`` also ``pretrained`` and
``similarity``, so reloading needs no checkpoint).
"""

from __future__ import annotations

import collections
import logging
import os
import time
import typing

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.config_io import check_types, from_dict, read_settings
from tfr_rankformer.core.run_layout import BEST_WEIGHTS, CONFIG_NAME, TEXT_RUN_NAME, VOCAB_NAME
from tfr_rankformer.ranking.evaluation import predict_step
from tfr_rankformer.ranking.losses import get_score_loss
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings
from tfr_rankformer.text import text_data
from tfr_rankformer.text.listformer import DOCUMENT_IDS, FIRST_STAGE, QUERY_IDS, build_text_model
from tfr_rankformer.text.listformer_config import ListformerForm
from tfr_rankformer.text.text_tokenizer import TextTokenizer, read_vocabulary
from tfr_rankformer.training.precision import precision_policy
from tfr_rankformer.training.train_config import TrainConfig

__all__ = [
    "LOGGED",
    "evaluate_text_model",
    "load_text_run",
    "takes_first_stage",
    "text_model_inputs",
    "token_caps",
]


logger = logging.getLogger(__name__)

# The validation metrics a text run logs each epoch (``val_*``).
LOGGED = ("ndcg_y@1", "ndcg_y@5", "ndcg_y@10", "list_auc_t>=1")


class _Pretrained(typing.TypedDict):
    """``text_model.json``'s ``pretrained`` entry: the layers' form, rows and tokenisation."""

    form: dict
    vocab_size: int
    lower_case: bool
    basic_tokenization: bool


def token_caps(config: TrainConfig) -> dict:
    """``config.text``'s token caps, as the tokenizers take them."""
    return {k: getattr(config.text, k) for k in ("max_query_tokens", "max_document_tokens")}


def takes_first_stage(model: tf.keras.Model) -> bool:
    """Whether a text model takes the first stage's scores as an input."""
    return isinstance(model.input, dict) and FIRST_STAGE in model.input


def text_model_inputs(
    tokenizer: TextTokenizer,
    batch: dict,
    *,
    token_multiples: tuple[int, int] = (1, 1),
    first_stage: bool = False,
) -> dict:
    """Model inputs of a batch of text lists, the token axes padded (``-1``) to multiples of
    ``token_multiples`` ``(q, t)`` within the caps (few shapes to trace)."""
    tokens = tokenizer.encode(batch[text_data.QUERY], batch[text_data.DOCUMENTS])
    caps = (tokenizer.max_query_tokens, tokenizer.max_document_tokens)
    for key, multiple, cap in zip(("query_ids", "document_ids"), token_multiples, caps):
        tokens[key] = _padded_up(tokens[key], multiple, cap)
    return _inputs(tokens, batch, first_stage)


def _inputs(tokens: dict, batch: dict, first_stage: bool) -> dict:
    """Model inputs from ``TextTokenizer.encode``'s ``tokens`` and the batch."""
    inputs = {
        QUERY_IDS: tokens["query_ids"],
        DOCUMENT_IDS: tokens["document_ids"],
        text_data.MASK: batch[text_data.MASK],
    }
    if first_stage:
        inputs[FIRST_STAGE] = batch[text_data.FIRST_STAGE]
    return inputs


def _padded_up(ids: tf.Tensor, multiple: int, cap: int) -> tf.Tensor:
    """``ids [..., K]`` padded with ``-1`` to ``K`` rounded up to ``multiple``, within ``cap``."""
    if multiple == 1:
        return ids
    length = tf.shape(ids)[-1]
    target = tf.maximum(tf.minimum(-(-length // multiple) * multiple, cap), length)
    padding = [[0, 0]] * (ids.shape.rank - 1) + [[0, target - length]]
    return tf.pad(ids, padding, constant_values=-1)


def _evaluation_batches(
    tokenizer, data, split: str, batch_size: int, first_stage: bool
) -> tf.data.Dataset:
    """``(inputs, labels, cut)`` of ``split``'s lists, sorted by length."""
    lists = text_data.parsed_text_lists(data, split, list_size=None)
    batches = text_data.length_sorted_batches(lists, batch_size, window=64)

    def encoded(batch):
        mask = batch[text_data.MASK]
        tokens = tokenizer.encode(batch[text_data.QUERY], batch[text_data.DOCUMENTS])
        cut = {
            "queries_cut": tf.reduce_sum(tf.cast(tokens["query_cut"], tf.int32)),
            "documents_cut": tf.reduce_sum(tf.cast(tokens["documents_cut"] & mask, tf.int32)),
        }
        return _inputs(tokens, batch, first_stage), batch[text_data.LABEL], cut

    return batches.map(encoded, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


class _EvaluationProgress:
    """Logs a line every ``every`` seconds of an evaluation (a silent minute looks hung)."""

    def __init__(self, split: str, every: float = 30.0, clock=time.monotonic):
        self.split, self.every, self.clock = split, every, clock
        self.start = self.last = clock()
        self.lists = 0

    def lists_done(self, count: int) -> None:
        self.lists += count
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            seconds = now - self.start
            rate = self.lists / max(seconds, 1e-9)
            message = "evaluating %s: %d lists in %.0f s, %.2f lists/s"
            logger.info(message, self.split, self.lists, seconds, rate)


def evaluate_text_model(
    model, tokenizer, data, split: str, *, batch_size: int, list_head: bool, max_label: int
) -> dict:
    """The ranking metrics of ``model`` on ``split``, what the token caps cut in
    ``truncation``."""
    step = predict_step(model)
    parts = collections.defaultdict(list)
    cut = collections.Counter()
    batches = _evaluation_batches(tokenizer, data, split, batch_size, takes_first_stage(model))
    progress = _EvaluationProgress(split)
    for inputs, labels, batch_cut in batches:
        cut.update({key: int(value) for key, value in batch_cut.items()})
        outputs = step(inputs)
        progress.lists_done(len(labels))
        parts["scores"].append(outputs["scores"].numpy())
        parts["label"].append(labels.numpy())
        parts["mask"].append(inputs[text_data.MASK].numpy())
        if "list_quality" in outputs:
            parts["probs"].append(tf.sigmoid(outputs["list_quality"]).numpy())
    if not parts["mask"]:
        raise ValueError(f"{data.directory}: the {split!r} split holds no lists")
    width = max(m.shape[1] for m in parts["mask"])

    def pad(arrays, value):
        return np.concatenate(
            [np.pad(a, [(0, 0), (0, width - a.shape[1])], constant_values=value) for a in arrays]
        )

    labels = pad(parts["label"], -1.0)
    mask = pad(parts["mask"], False)
    # Documents without a label (-1) are scored but left out of the metrics.
    unlabelled = int((mask & (labels < 0)).sum())
    mask &= labels >= 0
    metrics = evaluate_rankings(
        pad(parts["scores"], -np.inf),
        labels,
        labels,
        mask,
        max_label=max_label,
        list_probs=np.concatenate(parts["probs"]) if list_head and parts["probs"] else None,
    )
    metrics["truncation"] = {
        **cut,
        "documents": int(mask.sum()),
        "unlabelled_documents": unlabelled,
    }
    return metrics


def _read_text_run(model_dir: str) -> tuple[int, dict | None, dict | None]:
    """``text_model.json``'s ``label_levels``, checked ``pretrained`` and ``similarity``."""
    path = os.path.join(model_dir, TEXT_RUN_NAME)
    values = read_settings(path)
    settings, tower = values.get("pretrained"), values.get("similarity")
    if tower is not None and not isinstance(tower, dict):
        raise ValueError(f"{path}: 'similarity' must be an object of settings, got {tower!r}")
    if settings is None:
        return values["label_levels"], None, tower
    keys = sorted(_Pretrained.__annotations__)
    if not isinstance(settings, dict) or sorted(settings) != keys:
        raise ValueError(f"{path}: 'pretrained' must have the keys {keys}, got {settings!r}")
    check_types(_Pretrained, settings, where=f"{path}: 'pretrained'")
    try:
        form = from_dict(ListformerForm, settings["form"], what="listformer form")
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: 'pretrained.form': {error}") from error
    return values["label_levels"], dict(settings, form=form), tower


def load_text_run(model_dir: str, *, precision: str = "float32"):
    """``(config, tokenizer, model, max_label)`` of a trained text run with its best weights,
    computing in ``precision``."""
    config_path = os.path.join(model_dir, CONFIG_NAME)
    weights = os.path.join(model_dir, BEST_WEIGHTS)
    if not os.path.isfile(config_path) or not tf.io.gfile.exists(weights + ".index"):
        raise FileNotFoundError(f"{model_dir} is not a trained run (written by tfr-train)")
    config = TrainConfig.from_json(read_settings(config_path))
    max_label, pretrained, tower = _read_text_run(model_dir)
    vocabulary = read_vocabulary(os.path.join(model_dir, VOCAB_NAME))
    vocab_size, form, tokenization = len(vocabulary), None, {}
    if pretrained is not None:
        vocab_size, form = pretrained["vocab_size"], pretrained["form"]
        tokenization = {k: pretrained[k] for k in ("lower_case", "basic_tokenization")}
    tokenizer = TextTokenizer(vocabulary, **token_caps(config), **tokenization)
    score_loss = get_score_loss(config.loss)
    with precision_policy(precision):
        model = build_text_model(
            config.model,
            vocab_size,
            config.architecture,
            max_label if config.uses_list_head else None,
            item_levels=max_label if score_loss.output == "item_levels" else None,
            form=form,
            tower=tower,
        )
    status = model.load_weights(weights)
    status.expect_partial()
    return config, tokenizer, model, max_label
