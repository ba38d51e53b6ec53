"""Training the Listformer on text lists.

``tfr-train --model listformer`` lands here (``runner.train`` hands text
models over; the feature-vector models train in ``training``). ``model_dir/``
receives what a feature-vector run's does (``config.json``, ``checkpoints/``,
``history.csv``, ``logs/``, ``metrics.json``) and ``vocab.txt``, the WordPiece
vocabulary the model was trained with (built from the training split's text
unless ``--vocab`` gave one, or a checkpoint's with ``--init-from``).

With ``--init-from DIR`` (``TextConfig.init_from``) the model starts from a
BERT-family checkpoint (``listformer_checkpoint``): its sizes replace the
architecture's in the run's ``config.json``, its vocabulary and tokenisation
are the run's, and ``text_model.json`` records what rebuilding it needs.

Nothing is cut silently: lists longer than ``list_size`` are sampled anew each
epoch in training (documents shuffled, as the thesis does), evaluation keeps
every document, and the documents and queries cut at the token caps are
counted per split in ``metrics.json`` (``truncation``) and logged.
Single-process training only (no multi-worker strategy for text yet).
Evaluating text models and reloading text runs: ``text_runs``.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import os
import time

import numpy as np
import tensorflow as tf

from tfr_rankformer.config_io import write_json
from tfr_rankformer.losses import get_score_loss
from tfr_rankformer.multi_worker import worker_role
from tfr_rankformer.optimizers import build_optimizer
from tfr_rankformer.run_directory import check_run_directory, run_session
from tfr_rankformer.run_layout import (
    BEST_WEIGHTS,
    CONFIG_NAME,
    HISTORY_NAME,
    LOGS_NAME,
    METRICS_NAME,
    TEXT_RUN_NAME,
    VOCAB_NAME,
)
from tfr_rankformer.text import text_data
from tfr_rankformer.text.bert_checkpoint import BertCheckpoint, read_bert_checkpoint
from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.text.listformer_checkpoint import (
    PretrainedListformer,
    check_checkpoint_directory,
    checkpoint_tokenizer,
    pretrained_listformer,
)
from tfr_rankformer.text.text_runs import (
    evaluate_text_model,
    is_text_run,
    load_text_run,
    text_model_inputs,
    text_run_evaluator,
    text_tokenizer,
)
from tfr_rankformer.text.text_tokenizer import (
    TextTokenizer,
    build_vocabulary,
    read_vocabulary,
    write_vocabulary,
)
from tfr_rankformer.train_config import TrainConfig
from tfr_rankformer.training_callbacks import Throughput
from tfr_rankformer.training_setup import run_losses, weight_keeping

__all__ = [
    "VOCAB_NAME",
    "train_text",
    "load_text_run",
    "evaluate_text_model",
    "text_model_inputs",
    "is_text_run",
    "text_run_evaluator",
]

logger = logging.getLogger(__name__)

DEFAULT_LIST_SIZE = 100
LOGGED = ("ndcg_y@1", "ndcg_y@5", "ndcg_y@10", "list_auc_t>=1")


# With length buckets, training batches take few shapes (each compiles its own XLA
# pieces): documents rounded up to a multiple of 8, query and document tokens to 4, 16.
_DOCUMENT_MULTIPLE = 8
_TOKEN_MULTIPLES = (4, 16)


def _training_batches(config, data, tokenizer, *, list_size) -> tf.data.Dataset:
    """The epoch's ``(inputs, targets)``, tokenised in the input pipeline; with
    ``length_buckets``, lists of similar lengths batched together (few padded documents)."""
    lists = text_data.parsed_text_lists(
        data, "train", list_size=list_size, shuffle_documents=True, seed=config.seed
    )
    if not config.training_includes_empty_lists():
        lists = lists.filter(lambda e: tf.reduce_max(e[text_data.LABEL]) > 0)
    lists = lists.shuffle(10_000, seed=config.seed, reshuffle_each_iteration=True)
    multiples = _TOKEN_MULTIPLES if config.length_buckets else (1, 1)

    def to_model_io(batch):
        inputs = text_model_inputs(tokenizer, batch, token_multiples=multiples)
        labels = batch[text_data.LABEL]
        targets = {get_score_loss(config.loss).output: labels}
        if config.uses_list_head:
            t = tf.reduce_max(tf.where(batch[text_data.MASK], labels, 0.0), axis=-1)
            targets["list_quality"] = t[:, tf.newaxis]  # [B] -> [B, 1]
        return inputs, targets

    if config.length_buckets:  # lists of similar lengths together, little padding
        batches = text_data.length_sorted_batches(
            lists, config.batch_size, multiple=_DOCUMENT_MULTIPLE, seed=config.seed
        )
    else:  # every batch padded to --list-size documents (as before length buckets)
        batches = text_data.batched_text_lists(lists, config.batch_size)
    return batches.map(to_model_io, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


class TextEvaluationCallback(tf.keras.callbacks.Callback):
    """Adds validation metrics (``val_ndcg_y@10`` ...) to the logs after each epoch."""

    def __init__(self, tokenizer, data, *, batch_size: int, list_head: bool, max_label: int):
        super().__init__()
        self.settings = dict(batch_size=batch_size, list_head=list_head, max_label=max_label)
        self.tokenizer = tokenizer
        self.data = data

    def on_epoch_end(self, epoch, logs=None):
        metrics = evaluate_text_model(
            self.model, self.tokenizer, self.data, "vali", **self.settings
        )
        if logs is not None:
            for key in LOGGED:
                if key in metrics:
                    logs[f"val_{key}"] = metrics[key]


def _vocabulary(config: TrainConfig, word_counts) -> list[str]:
    if config.text.vocab:
        return read_vocabulary(config.text.vocab)
    return build_vocabulary(word_counts, size=config.text.vocab_size)


def _compile(
    config: TrainConfig,
    vocab_size: int,
    levels: int,
    steps: int,
    pretrained: PretrainedListformer | None = None,
) -> tf.keras.Model:
    """The model (``pretrained``'s, else a new one), compiled with the run's losses and
    optimizer."""
    if pretrained is not None:
        model = pretrained.model
    else:
        score_loss = get_score_loss(config.loss)
        item_levels = levels if score_loss.output == "item_levels" else None
        model = build_text_model(
            config.model,
            vocab_size,
            config.architecture,
            levels if config.uses_list_head else None,
            item_levels=item_levels,
        )
    losses, weights = run_losses(config, levels)
    model.compile(optimizer=build_optimizer(config, steps), loss=losses, loss_weights=weights)
    return model


@dataclasses.dataclass(frozen=True)
class _PreparedRun:
    """A text run ready to train: its data, the training split's scan, the
    vocabulary and tokenizer, and what they imply for the model and the epochs."""

    config: TrainConfig
    data: text_data.TextData
    scan: dict  # ``text_data.scan_split`` of the training split
    vocabulary: list[str]
    tokenizer: TextTokenizer
    levels: int  # list-label levels above 0 (at least 1)
    lists: int  # training lists per epoch
    steps: int  # steps per epoch
    list_size: int  # longer training lists are sampled down to this many documents
    pretrained: PretrainedListformer | None = None  # the start from ``--init-from``


def _read_checkpoint(config: TrainConfig) -> tuple[BertCheckpoint, TextTokenizer] | None:
    """``--init-from``'s checkpoint and its tokenizer with the run's token caps (read
    before the scan, so that a bad checkpoint fails first); ``None`` without one."""
    directory = config.text.init_from
    if directory is None:
        return None
    check_checkpoint_directory(directory)
    checkpoint = read_bert_checkpoint(directory)
    caps = {k: getattr(config.text, k) for k in ("max_query_tokens", "max_document_tokens")}
    return checkpoint, checkpoint_tokenizer(checkpoint, **caps)


def _pretrained(config: TrainConfig, start, levels: int) -> PretrainedListformer:
    """The Listformer in the checkpoint's sizes, form and weights, heads as the run's."""
    checkpoint, tokenizer = start
    item_levels = levels if get_score_loss(config.loss).output == "item_levels" else None
    return pretrained_listformer(
        checkpoint,
        tokenizer,
        config.architecture,
        levels if config.uses_list_head else None,
        item_levels=item_levels,
    )


def _prepare(config: TrainConfig) -> _PreparedRun:
    """Scans the training split and builds the vocabulary (or reads ``--vocab``'s), or
    starts from ``--init-from``'s checkpoint: its vocabulary, tokenizer and model, whose
    sizes replace the architecture's in the run's settings."""
    data = text_data.load_text_data(config.data, config.text)
    start = _read_checkpoint(config)
    word_counts = None if config.text.vocab or start else collections.Counter()
    list_size = config.list_size or DEFAULT_LIST_SIZE
    scan = text_data.scan_split(data, "train", word_counts=word_counts, list_size=list_size)
    levels = max(scan["max_label"], 1)
    pretrained = None if start is None else _pretrained(config, start, levels)
    if pretrained is None:
        vocabulary = _vocabulary(config, word_counts)
        tokenizer = text_tokenizer(config, vocabulary)
    else:
        config = dataclasses.replace(config, architecture=pretrained.config)
        vocabulary, tokenizer = pretrained.vocabulary, pretrained.tokenizer
    include = config.training_includes_empty_lists()
    lists = scan["lists"] - (0 if include else scan["lists_without_relevant"])
    if lists == 0:
        raise ValueError(f"{config.data}: no training list passes the training-list policy")
    return _PreparedRun(
        config=config,
        data=data,
        scan=scan,
        vocabulary=vocabulary,
        tokenizer=tokenizer,
        levels=levels,
        lists=lists,
        steps=math.ceil(lists / config.batch_size),
        list_size=list_size,
        pretrained=pretrained,
    )


def _start(run: _PreparedRun) -> None:
    """The new run's files (``run_session`` gave it an empty directory)."""
    config = run.config
    write_json(os.path.join(config.model_dir, CONFIG_NAME), config.to_json())
    write_vocabulary(os.path.join(config.model_dir, VOCAB_NAME), run.vocabulary)
    # What rebuilding the model needs besides config.json.
    text_run = {"label_levels": run.levels}
    if run.pretrained is not None:  # the form, token table and tokenisation of the start
        text_run["pretrained"] = run.pretrained.settings()
    write_json(os.path.join(config.model_dir, TEXT_RUN_NAME), text_run)


def train_text(
    config: TrainConfig,
    *,
    verbose: int = 1,
    final_weights: str | None = None,
    callbacks: list | None = None,
    existing: str = "refuse",
) -> dict:
    """Trains the Listformer on text ELWC, keeps the best weights, evaluates every split.

    Args:
      config: the run's settings (a text model's).
      verbose: ``fit``'s progress output.
      final_weights: if given, the weights training ended with (before the
        best ones are reloaded) are also written to this ``.npz`` file.
      callbacks: extra Keras callbacks, run after the loop's own.
      existing: what to do with a run already in ``model_dir`` (``refuse`` or
        ``overwrite``; text runs keep no backup to resume from).

    Returns:
      ``metrics.json``'s content.
    """
    if worker_role().multi_worker:
        raise ValueError(
            "the listformer trains in one process: multi-worker TF_CONFIG is not "
            "supported for text models"
        )
    # Refusals come before the scan of the training lists.
    check_run_directory(config.model_dir, config.to_json(), existing=existing, resumable=False)
    tf.keras.utils.set_random_seed(config.seed)
    run = _prepare(config)
    # Text runs keep no backup: they can be replaced, not resumed.
    # A pretrained start's settings hold the checkpoint's sizes.
    with run_session(config.model_dir, run.config.to_json(), existing=existing, resumable=False):
        _start(run)
        return _train_text(run, verbose=verbose, final_weights=final_weights, extra=callbacks)


def _callbacks(run: _PreparedRun, model, extra: list | None) -> tuple[list, str]:
    """The training callbacks (the caller's last), and the logged value that picks the
    best weights."""
    config = run.config
    callbacks = [Throughput(run.lists, run.steps)]
    has_vali = "vali" in run.data.files
    if has_vali:
        callbacks.append(
            TextEvaluationCallback(
                run.tokenizer,
                run.data,
                batch_size=config.eval_batch_size,
                list_head=config.uses_list_head,
                max_label=run.levels,
            )
        )
    kept, monitor = weight_keeping(config, model, has_vali=has_vali)
    callbacks += kept
    callbacks += [
        tf.keras.callbacks.CSVLogger(os.path.join(config.model_dir, HISTORY_NAME)),
        tf.keras.callbacks.TensorBoard(os.path.join(config.model_dir, LOGS_NAME)),
        *(extra or []),
    ]
    return callbacks, monitor


def _log_truncation(config: TrainConfig, metrics: dict) -> None:
    """Warns of each split whose documents or queries were cut at the token caps."""
    for split, values in metrics.items():
        cut = values["truncation"]
        if cut["documents_cut"] or cut["queries_cut"]:
            logger.warning(
                "%s: %d of %d documents and %d queries were longer than the token caps "
                "(%d, %d) and were cut",
                split,
                cut["documents_cut"],
                cut["documents"],
                cut["queries_cut"],
                config.text.max_document_tokens,
                config.text.max_query_tokens,
            )


def _train_text(
    run: _PreparedRun, *, verbose: int, final_weights: str | None, extra: list | None
) -> dict:
    """``train_text``'s work inside the run directory."""
    config, data, scan, tokenizer = run.config, run.data, run.scan, run.tokenizer
    model = _compile(config, len(run.vocabulary), run.levels, run.steps, run.pretrained)
    logger.info(
        "training listformer on %d lists/epoch (%d documents, longest list %d; %d lists over "
        "--list-size %d are sampled anew each epoch), vocabulary of %d WordPiece tokens",
        run.lists,
        scan["documents"],
        scan["longest_list"],
        scan["lists_longer_than_list_size"],
        run.list_size,
        len(run.vocabulary),
    )
    callbacks, monitor = _callbacks(run, model, extra)
    train_data = _training_batches(config, data, tokenizer, list_size=run.list_size)
    started = time.perf_counter()
    history = model.fit(train_data, epochs=config.epochs, callbacks=callbacks, verbose=verbose)
    seconds = time.perf_counter() - started
    if final_weights:
        np.savez(final_weights, *model.get_weights())
    model.load_weights(os.path.join(config.model_dir, BEST_WEIGHTS))
    evaluation = dict(batch_size=config.eval_batch_size, list_head=config.uses_list_head)
    metrics = {
        split: evaluate_text_model(
            model, tokenizer, data, split, max_label=run.levels, **evaluation
        )
        for split in data.files
    }
    _log_truncation(config, metrics)
    metrics["training"] = {
        "epochs_completed": len(history.epoch),
        "seconds": seconds,
        "lists_per_epoch": run.lists,
        "train_scan": scan,
        "vocabulary_size": len(run.vocabulary),
        "monitor": monitor,
    }
    metrics["settings"] = config.to_json()
    write_json(os.path.join(config.model_dir, METRICS_NAME), metrics)
    return metrics
