"""A text model's inputs, evaluating a text model, and reloading a trained text run.

Besides a feature-vector run's files, a text run's ``model_dir/`` holds
``vocab.txt`` (the WordPiece vocabulary the model was trained with) and
``text_model.json`` (what rebuilding the model needs besides ``config.json``;
both named in ``run_layout``). ``text_training`` writes them;
``load_text_run`` reads them back for evaluation (``text_run_evaluator``, which
``runner.evaluate`` uses) and export (``text_export``).
"""

from __future__ import annotations

import collections
import json
import os
import weakref

import numpy as np
import tensorflow as tf

from tfr_rankformer.evaluation import RunEvaluator
from tfr_rankformer.losses import get_score_loss
from tfr_rankformer.ranking_metrics import evaluate_rankings
from tfr_rankformer.run_layout import (
    BEST_WEIGHTS,
    CONFIG_NAME,
    TEXT_RUN_NAME,
    VOCAB_NAME,
    is_text_run,
)
from tfr_rankformer.text import text_data
from tfr_rankformer.text.listformer import DOCUMENT_IDS, QUERY_IDS, build_text_model
from tfr_rankformer.text.text_tokenizer import TextTokenizer, read_vocabulary
from tfr_rankformer.train_config import TrainConfig

__all__ = [
    "VOCAB_NAME",
    "TEXT_RUN_NAME",
    "text_tokenizer",
    "text_model_inputs",
    "evaluate_text_model",
    "is_text_run",
    "load_text_run",
    "text_run_evaluator",
]


def text_tokenizer(config: TrainConfig, vocabulary: list[str]) -> TextTokenizer:
    """The run's tokenizer: ``vocabulary`` with the token caps of ``config.text``."""
    return TextTokenizer(
        vocabulary,
        max_query_tokens=config.text.max_query_tokens,
        max_document_tokens=config.text.max_document_tokens,
    )


def text_model_inputs(tokenizer: TextTokenizer, batch: dict) -> dict:
    """Model inputs of a batch of text lists (``text_data``'s layout)."""
    encoded = tokenizer.encode(batch[text_data.QUERY], batch[text_data.DOCUMENTS])
    return {
        QUERY_IDS: encoded["query_ids"],
        DOCUMENT_IDS: encoded["document_ids"],
        text_data.MASK: batch[text_data.MASK],
    }


# Kept beside the models (weakly), not on them: a function stored on a model would be
# saved with it; one trace serves every later evaluation.
_PREDICT_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _predict_step(model):
    step = _PREDICT_STEPS.get(model)
    if step is None:
        signature = {
            QUERY_IDS: tf.TensorSpec([None, None], tf.int32),
            DOCUMENT_IDS: tf.TensorSpec([None, None, None], tf.int32),
            text_data.MASK: tf.TensorSpec([None, None], tf.bool),
        }
        ref = weakref.ref(model)
        step = tf.function(
            lambda inputs: ref()(inputs, training=False), input_signature=[signature]
        )
        _PREDICT_STEPS[model] = step
    return step


def evaluate_text_model(
    model, tokenizer, data, split: str, *, batch_size: int, list_head: bool, max_label: int
) -> dict:
    """NDCG (x 100, the shared ranking metrics) of ``model`` on every list of ``split``,
    with the documents and queries cut at the token caps counted under ``truncation``."""
    step = _predict_step(model)
    parts = collections.defaultdict(list)
    cut = collections.Counter()
    lists = text_data.parsed_text_lists(data, split, list_size=None)
    for batch in text_data.batched_text_lists(lists, batch_size):
        encoded = tokenizer.encode(batch[text_data.QUERY], batch[text_data.DOCUMENTS])
        mask = batch[text_data.MASK]
        cut["queries_cut"] += int(tf.reduce_sum(tf.cast(encoded["query_cut"], tf.int32)))
        cut["documents_cut"] += int(
            tf.reduce_sum(tf.cast(encoded["documents_cut"] & mask, tf.int32))
        )
        outputs = step(
            {
                QUERY_IDS: encoded["query_ids"],
                DOCUMENT_IDS: encoded["document_ids"],
                text_data.MASK: mask,
            }
        )
        parts["scores"].append(outputs["scores"].numpy())
        parts["label"].append(batch[text_data.LABEL].numpy())
        parts["mask"].append(mask.numpy())
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


def load_text_run(model_dir: str):
    """``(config, tokenizer, model, max_label)`` of a trained text run, with its best weights.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained text run.
    """
    config_path = os.path.join(model_dir, CONFIG_NAME)
    weights = os.path.join(model_dir, BEST_WEIGHTS)
    if not os.path.isfile(config_path) or not tf.io.gfile.exists(weights + ".index"):
        raise FileNotFoundError(f"{model_dir} is not a trained run (written by tfr-train)")
    with open(config_path, encoding="utf-8") as f:
        config = TrainConfig.from_json(json.load(f))
    with open(os.path.join(model_dir, TEXT_RUN_NAME), encoding="utf-8") as f:
        max_label = json.load(f)["label_levels"]
    vocabulary = read_vocabulary(os.path.join(model_dir, VOCAB_NAME))
    tokenizer = text_tokenizer(config, vocabulary)
    score_loss = get_score_loss(config.loss)
    model = build_text_model(
        config.model,
        len(vocabulary),
        config.architecture,
        max_label if config.uses_list_head else None,
        item_levels=max_label if score_loss.output == "item_levels" else None,
    )
    status = model.load_weights(weights)
    status.expect_partial()
    return config, tokenizer, model, max_label


def text_run_evaluator(model_dir: str, data_dir: str | None) -> RunEvaluator:
    """The evaluator of a trained text run on ``data_dir`` (default: its training data)."""
    config, tokenizer, model, max_label = load_text_run(model_dir)
    data = text_data.load_text_data(data_dir or config.data, config.text)

    def evaluate(split: str) -> dict:
        return evaluate_text_model(
            model,
            tokenizer,
            data,
            split,
            batch_size=config.eval_batch_size,
            list_head=config.uses_list_head,
            max_label=max_label,
        )

    return RunEvaluator(config.data, data_dir or config.data, list(data.files), evaluate)
