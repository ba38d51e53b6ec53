"""A text model's inputs, evaluating a text model, and reloading a trained text run.

A text run's ``text_model.json`` (``text_family`` writes it) holds ``label_levels`` and,
for a run started from a checkpoint (``--init-from``), ``pretrained``: the layers' form,
the token table's rows and the tokenisation, so that reloading needs no checkpoint; and
``similarity``: the frozen checkpoint encoder's settings when the score is a residual
over its cosine (``score_mixture``).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import time
import weakref

import numpy as np
import tensorflow as tf

from tfr_rankformer.core.run_layout import BEST_WEIGHTS, CONFIG_NAME, TEXT_RUN_NAME, VOCAB_NAME
from tfr_rankformer.ranking.losses import get_score_loss
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings
from tfr_rankformer.text import text_data
from tfr_rankformer.text.listformer import DOCUMENT_IDS, FIRST_STAGE, QUERY_IDS, build_text_model
from tfr_rankformer.text.listformer_form import ListformerForm
from tfr_rankformer.text.text_tokenizer import TextTokenizer, read_vocabulary
from tfr_rankformer.training.precision import precision_policy
from tfr_rankformer.training.train_config import TrainConfig

__all__ = [
    "LOGGED",
    "evaluate_text_model",
    "load_text_run",
    "takes_first_stage",
    "text_model_inputs",
    "text_tokenizer",
]


logger = logging.getLogger(__name__)

# The validation metrics a text run logs each epoch (``val_*``).
LOGGED = ("ndcg_y@1", "ndcg_y@5", "ndcg_y@10", "list_auc_t>=1")

# A pretrained run's ``pretrained`` entry of ``text_model.json``: key -> expected types.
_PRETRAINED_KEYS = {
    "form": (dict,),
    "vocab_size": (int,),
    "lower_case": (bool,),
    "basic_tokenization": (bool,),
}


def text_tokenizer(
    config: TrainConfig,
    vocabulary: list[str],
    *,
    lower_case: bool = True,
    basic_tokenization: bool = False,
) -> TextTokenizer:
    """The run's tokenizer: ``vocabulary`` with the token caps of ``config.text`` (and a
    checkpoint's lower-casing and basic tokenisation for a pretrained run)."""
    return TextTokenizer(
        vocabulary,
        max_query_tokens=config.text.max_query_tokens,
        max_document_tokens=config.text.max_document_tokens,
        lower_case=lower_case,
        basic_tokenization=basic_tokenization,
    )


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
    """Model inputs of a batch of text lists (``text_data``'s layout), the token axes padded
    (``-1``, which changes no score) to multiples of ``token_multiples`` ``(q, t)`` within
    the caps so that batches take few shapes; with the first-stage scores if asked."""
    encoded = tokenizer.encode(batch[text_data.QUERY], batch[text_data.DOCUMENTS])
    query_multiple, document_multiple = token_multiples
    inputs = {
        QUERY_IDS: _padded_up(encoded["query_ids"], query_multiple, tokenizer.max_query_tokens),
        DOCUMENT_IDS: _padded_up(
            encoded["document_ids"], document_multiple, tokenizer.max_document_tokens
        ),
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
        if takes_first_stage(model):
            signature[FIRST_STAGE] = tf.TensorSpec([None, None], tf.float32)
        ref = weakref.ref(model)
        step = tf.function(
            lambda inputs: ref()(inputs, training=False), input_signature=[signature]
        )
        _PREDICT_STEPS[model] = step
    return step


# Evaluation sorts the lists by length in windows of this many batches.
_EVALUATION_WINDOW = 64


def _evaluation_batches(
    tokenizer, data, split: str, batch_size: int, first_stage: bool
) -> tf.data.Dataset:
    """``(inputs, labels, cut)`` for every batch of ``split``'s lists, lists of similar
    lengths together (little padding), tokenised in the input pipeline."""
    lists = text_data.parsed_text_lists(data, split, list_size=None)
    batches = text_data.length_sorted_batches(lists, batch_size, window=_EVALUATION_WINDOW)

    def encoded(batch):
        mask = batch[text_data.MASK]
        tokens = tokenizer.encode(batch[text_data.QUERY], batch[text_data.DOCUMENTS])
        inputs = {
            QUERY_IDS: tokens["query_ids"],
            DOCUMENT_IDS: tokens["document_ids"],
            text_data.MASK: mask,
        }
        if first_stage:
            inputs[FIRST_STAGE] = batch[text_data.FIRST_STAGE]
        cut = {
            "queries_cut": tf.reduce_sum(tf.cast(tokens["query_cut"], tf.int32)),
            "documents_cut": tf.reduce_sum(tf.cast(tokens["documents_cut"] & mask, tf.int32)),
        }
        return inputs, batch[text_data.LABEL], cut

    return batches.map(encoded, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


class _EvaluationProgress:
    """Logs a line every ``every`` seconds while a split is evaluated (a silent minute
    looks hung)."""

    def __init__(self, split: str, every: float = 30.0, clock=time.monotonic):
        self.split, self.every, self.clock = split, every, clock
        self.start = self.last = clock()
        self.lists = 0

    def lists_done(self, count: int) -> None:
        self.lists += count
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            rate = self.lists / max(now - self.start, 1e-9)
            logger.info(
                "evaluating %s: %d lists in %.0f s, %.2f lists/s",
                self.split,
                self.lists,
                now - self.start,
                rate,
            )


def evaluate_text_model(
    model, tokenizer, data, split: str, *, batch_size: int, list_head: bool, max_label: int
) -> dict:
    """NDCG (x 100, the shared ranking metrics) of ``model`` on every list of ``split``,
    with the documents and queries cut at the token caps counted under ``truncation``."""
    step = _predict_step(model)
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


def _pretrained_settings(path: str, values: dict) -> dict | None:
    """The ``pretrained`` entry of ``text_model.json`` (``None``: a from-scratch run),
    checked."""
    settings = values.get("pretrained")
    if settings is None:
        return None
    if not isinstance(settings, dict) or set(settings) != set(_PRETRAINED_KEYS):
        raise ValueError(
            f"{path}: 'pretrained' must be an object with the keys {sorted(_PRETRAINED_KEYS)}, "
            f"got {settings!r}"
        )
    for key, types in _PRETRAINED_KEYS.items():
        value = settings[key]
        if not isinstance(value, types) or (types == (int,) and isinstance(value, bool)):
            raise ValueError(f"{path}: 'pretrained.{key}' has a bad value {value!r}")
    try:
        form = ListformerForm.from_json(settings["form"])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path}: 'pretrained.form': {error}") from error
    return dict(settings, form=form)


def _read_text_run(model_dir: str) -> tuple[int, dict | None, dict | None]:
    """``label_levels``, the checked ``pretrained`` entry of ``text_model.json`` and its
    ``similarity`` entry (the checkpoint encoder's settings, or ``None``)."""
    path = os.path.join(model_dir, TEXT_RUN_NAME)
    with open(path, encoding="utf-8") as f:
        values = json.load(f)
    tower = values.get("similarity")
    if tower is not None and not isinstance(tower, dict):
        raise ValueError(f"{path}: 'similarity' must be an object of settings, got {tower!r}")
    return values["label_levels"], _pretrained_settings(path, values), tower


def load_text_run(model_dir: str, *, precision: str = "float32"):
    """``(config, tokenizer, model, max_label)`` of a trained text run, with its best weights
    (a pretrained start rebuilt from ``text_model.json``, without its checkpoint), computing
    in ``precision`` (float32 whatever the run trained in, unless told).

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained text run.
      ValueError: naming ``text_model.json`` if its ``pretrained`` entry is bad.
    """
    config_path = os.path.join(model_dir, CONFIG_NAME)
    weights = os.path.join(model_dir, BEST_WEIGHTS)
    if not os.path.isfile(config_path) or not tf.io.gfile.exists(weights + ".index"):
        raise FileNotFoundError(f"{model_dir} is not a trained run (written by tfr-train)")
    with open(config_path, encoding="utf-8") as f:
        config = TrainConfig.from_json(json.load(f))
    max_label, pretrained, tower = _read_text_run(model_dir)
    vocabulary = read_vocabulary(os.path.join(model_dir, VOCAB_NAME))
    vocab_size, form, tokenization = len(vocabulary), None, {}
    if pretrained is not None:
        vocab_size, form = pretrained["vocab_size"], pretrained["form"]
        tokenization = {k: pretrained[k] for k in ("lower_case", "basic_tokenization")}
    tokenizer = text_tokenizer(config, vocabulary, **tokenization)
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
