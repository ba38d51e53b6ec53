"""``TextFamily``: the text models (the Listformer) on text ELWC, through the one training
loop in one process; a run also writes ``vocab.txt`` and ``text_model.json``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import os

import tensorflow as tf

from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.core.model_spec import ModelFamily
from tfr_rankformer.core.run_layout import (
    TEXT_RUN_NAME,
    VOCAB_NAME,
    is_text_run,
    is_token_id_export,
)
from tfr_rankformer.inputs.empty_splits import empty_splits
from tfr_rankformer.ranking.evaluation import RunEvaluator
from tfr_rankformer.ranking.losses import get_score_loss
from tfr_rankformer.serving.client_tokenizer import ClientTokenizer
from tfr_rankformer.serving.prediction import (
    ServedModel,
    resolve_export,
    score_text_lists,
    text_inputs,
)
from tfr_rankformer.serving.serving_requests import SIGNATURE_ELWC
from tfr_rankformer.text import text_data
from tfr_rankformer.text.bert_checkpoint import read_bert_checkpoint
from tfr_rankformer.text.listformer import build_text_model
from tfr_rankformer.text.listformer_checkpoint import (
    check_checkpoint_directory,
    checkpoint_form,
    checkpoint_model_config,
    checkpoint_tokenizer,
    pretrained_listformer,
    pretrained_settings,
)
from tfr_rankformer.text.sentence_tower import tower_settings
from tfr_rankformer.text.text_export import export_text_run
from tfr_rankformer.text.text_plan import evaluation_lists, plan_text_run, text_shape
from tfr_rankformer.text.text_runs import (
    LOGGED,
    evaluate_text_model,
    load_text_run,
    text_model_inputs,
    token_caps,
)
from tfr_rankformer.text.text_tokenizer import (
    TextTokenizer,
    build_vocabulary,
    read_vocabulary,
    register_text_ops,
    write_vocabulary,
)
from tfr_rankformer.training import loop
from tfr_rankformer.training.loop import PreparedRun
from tfr_rankformer.training.optimizers import build_optimizer
from tfr_rankformer.training.training_setup import run_losses

__all__ = ["TextFamily"]

logger = logging.getLogger(__name__)

# Documents a training list keeps at most when --list-size is not given.
DEFAULT_LIST_SIZE = 100
BATCH_SIZE = 16  # lists per model call when ``predict`` is not told: evaluation's


@dataclasses.dataclass(frozen=True)
class _TextStart:
    """What ``prepare`` settled beside the run's data."""

    vocabulary: list
    tokenizer: object
    scan: dict
    checkpoint: object = None  # the ``--init-from`` checkpoint


def _parameters(config, vocab_size: int) -> int:
    """The Listformer's weights, from its sizes."""
    a = config.architecture
    d, f = a.width, a.ff_dim
    layer = 7 * d * d + 2 * d * f + f + 13 * d
    return (vocab_size + a.max_positions + 8) * d + a.num_layers * layer + d + 1


def _splits_with_lists(data: text_data.TextData) -> tuple[str, ...]:
    """The data's splits, ``train`` first, without those recorded as empty."""
    empty = set(empty_splits(data.manifest)) - {"train"}
    for split in sorted(empty & set(data.files)):
        logger.warning("%s: the %r split holds no lists; it is left out", data.directory, split)
    return tuple(s for s in sorted(data.files, key=lambda s: s != "train") if s not in empty)


def _with_first_stage(config, data: text_data.TextData):
    """``config`` with ``first_stage`` settled by the data (refused if asked for and absent)."""
    first_stage = config.architecture.first_stage
    if first_stage and not data.has_first_stage:
        raise ValueError(
            f"--first-stage on: {data.directory} holds no first-stage scores (tfr-convert "
            "--input trec keeps a run's scores); pass --first-stage off or auto"
        )
    if first_stage is None:
        first_stage = data.has_first_stage
    architecture = dataclasses.replace(config.architecture, first_stage=first_stage)
    return dataclasses.replace(config, architecture=architecture)


def _start(config):
    """``(config, checkpoint, tokenizer, vocab_size)`` of ``--init-from`` (``None`` without)."""
    directory = config.text.init_from
    if directory is None:
        return config, None, None, None
    check_checkpoint_directory(directory)  # a bad checkpoint fails before the scan
    checkpoint = read_bert_checkpoint(directory)
    tokenizer = checkpoint_tokenizer(checkpoint, **token_caps(config))
    architecture = checkpoint_model_config(checkpoint, config.architecture)
    config = dataclasses.replace(config, architecture=architecture)
    return config, checkpoint, tokenizer, checkpoint.vocab_size


@dataclasses.dataclass(frozen=True)
class TextFamily:
    """Text lists: TF-Ranking's text ELWC (``text_data``)."""

    record: ModelFamily

    # === Runner ===

    def owns(self, path: str) -> bool:
        return is_text_run(path)

    def train(self, config, **options) -> dict:
        return loop.train(config, self, **options)

    def evaluator(self, model_dir: str, data_dir: str | None) -> RunEvaluator:
        config, tokenizer, model, max_label = load_text_run(model_dir)
        data = text_data.load_text_data(data_dir or config.data, config.text)
        settings = dict(batch_size=config.eval_batch_size, max_label=max_label)
        settings["list_head"] = config.uses_list_head
        evaluate = functools.partial(evaluate_text_model, model, tokenizer, data, **settings)
        return RunEvaluator(config.data, data_dir or config.data, list(data.files), evaluate)

    def export(
        self, model_dir: str, *, version: int | None, invalid_items: str, precision: str
    ) -> str:
        del invalid_items  # no item features to check
        return export_text_run(model_dir, version=version, precision=precision)

    def load(self, path: str) -> ServedModel:
        path = resolve_export(path)
        tokenizer = ClientTokenizer.from_export(path) if is_token_id_export(path) else None
        if tokenizer is None:
            register_text_ops()  # its graph tokenises with TF Text's ops
        return ServedModel(path, self.record.kind, None, tf.saved_model.load(path), tokenizer)

    def score(self, served: ServedModel, lists, files, batch_size: int | None):
        if files is not None:
            raise ValueError(f"{served.path} scores text lists, not ELWC files")
        signature = served.model.signatures[SIGNATURE_ELWC]
        inputs = text_inputs if served.tokenizer is None else served.tokenizer.arrays
        batch_size = batch_size or BATCH_SIZE
        return score_text_lists(signature, lists, batch_size=batch_size, inputs=inputs)

    # === Training loop ===

    def prepare(self, config, *, worker) -> PreparedRun:
        if worker.multi_worker:
            raise ValueError(
                f"{config.model} trains in one process: multi-worker TF_CONFIG is not "
                "supported for text models"
            )
        data = text_data.load_text_data(config.data, config.text)
        config = _with_first_stage(config, data)
        config, checkpoint, tokenizer, vocab_size = _start(config)
        words = None if config.text.vocab or checkpoint else collections.Counter()
        cap = config.list_size or DEFAULT_LIST_SIZE
        scan = text_data.scan_split(data, "train", word_counts=words, list_size=cap)
        if checkpoint is not None:
            vocabulary = list(checkpoint.vocabulary)
        elif config.text.vocab:
            vocabulary = read_vocabulary(config.text.vocab)
        else:
            vocabulary = build_vocabulary(words, size=config.text.vocab_size)
        tokenizer = tokenizer or TextTokenizer(vocabulary, **token_caps(config))
        parameters = _parameters(config, vocab_size or len(vocabulary))
        tower = config.architecture.similarity == "checkpoint"
        frozen = _parameters(config, vocab_size) if tower else 0
        shape = text_shape(config, parameters, frozen)
        include = config.training_includes_empty_lists()
        plan = plan_text_run(config, scan, shape=shape, cap=cap, include_empty=include)
        start = _TextStart(vocabulary, tokenizer, scan, checkpoint)
        hints = dict(item_tokens=config.text.max_document_tokens, shorter_lists=max(8, cap // 2))
        splits = _splits_with_lists(data)
        levels = max(scan["max_label"], 1)
        return PreparedRun(config, plan, levels, splits, data, start, memory_hints=hints)

    def write_start(self, run: PreparedRun) -> None:
        start, directory = run.extra, run.config.model_dir
        write_vocabulary(os.path.join(directory, VOCAB_NAME), start.vocabulary)
        # What rebuilding the model needs besides config.json.
        text_run = {"label_levels": run.levels}
        if start.checkpoint is not None:  # the form, token table and tokenisation of the start
            form, size = checkpoint_form(start.checkpoint), start.checkpoint.vocab_size
            text_run["pretrained"] = pretrained_settings(form, size, start.tokenizer)
        if run.config.architecture.similarity == "checkpoint":
            text_run["similarity"] = tower_settings(start.checkpoint)
        write_json(os.path.join(directory, TEXT_RUN_NAME), text_run)

    def build(self, run: PreparedRun, *, steps_per_epoch: int, xla: bool) -> tuple:
        config, levels, start = run.config, run.levels, run.extra
        list_levels = levels if config.uses_list_head else None
        item_levels = levels if get_score_loss(config.loss).output == "item_levels" else None
        if start.checkpoint is not None:
            pretrained = (start.checkpoint, start.tokenizer, config.architecture, list_levels)
            model = pretrained_listformer(*pretrained, item_levels=item_levels).model
        else:
            vocab_size = len(start.vocabulary)
            built = (config.model, vocab_size, config.architecture, list_levels)
            model = build_text_model(*built, item_levels=item_levels)
        losses, weights = run_losses(config, levels)
        optimizer = build_optimizer(config, steps_per_epoch)
        model.compile(optimizer=optimizer, loss=losses, loss_weights=weights, jit_compile=xla)
        return model, model

    def training_data(self, run: PreparedRun, model, cache_dir: str) -> tf.data.Dataset:
        del model, cache_dir  # text lists are parsed anew each epoch
        config, tokenizer = run.config, run.extra.tokenizer
        multiples = text_data.TOKEN_MULTIPLES if config.length_buckets else (1, 1)
        output = get_score_loss(config.loss).output
        first_stage = bool(config.architecture.first_stage)

        def to_model_io(batch):
            inputs = text_model_inputs(
                tokenizer, batch, token_multiples=multiples, first_stage=first_stage
            )
            labels = batch[text_data.LABEL]
            targets = {output: labels}
            if config.uses_list_head:
                t = tf.reduce_max(tf.where(batch[text_data.MASK], labels, 0.0), axis=-1)
                targets["list_quality"] = t[:, tf.newaxis]  # [B] -> [B, 1]
            return inputs, targets

        return text_data.training_batches(run.data, run.plan, config, to_model_io)

    def _evaluation(self, run: PreparedRun) -> dict:
        longest = max(run.data.manifest.longest_list, run.extra.scan["longest_list"])
        batch_size = evaluation_lists(run.config, longest)
        return dict(
            batch_size=batch_size, list_head=run.config.uses_list_head, max_label=run.levels
        )

    def validation(self, run: PreparedRun, model) -> tf.keras.callbacks.Callback:
        settings = self._evaluation(run)

        def log_metrics(epoch, logs):  # val_ndcg_y@10 ... in each epoch's logs
            metrics = evaluate_text_model(model, run.extra.tokenizer, run.data, "vali", **settings)
            logs.update({f"val_{k}": metrics[k] for k in LOGGED if k in metrics})

        return tf.keras.callbacks.LambdaCallback(on_epoch_end=log_metrics)

    def evaluate(self, run: PreparedRun, model, splits: tuple[str, ...]) -> dict:
        settings, tokenizer = self._evaluation(run), run.extra.tokenizer
        metrics = {
            s: evaluate_text_model(model, tokenizer, run.data, s, **settings) for s in splits
        }
        _log_truncation(run.config, metrics)
        return metrics

    def fitting(self, run: PreparedRun):
        return contextlib.nullcontext()

    def summary(self, run: PreparedRun) -> dict:
        return {"train_scan": run.extra.scan, "vocabulary_size": len(run.extra.vocabulary)}


def _log_truncation(config, metrics: dict) -> None:
    """Warns of each split whose documents or queries were cut at the token caps."""
    caps = (config.text.max_document_tokens, config.text.max_query_tokens)
    for split, values in metrics.items():
        cut = values["truncation"]
        if cut["documents_cut"] or cut["queries_cut"]:
            logger.warning(
                "%s: %d of %d documents and %d queries were longer than the token caps "
                "(%d, %d) and were cut",
                *(split, cut["documents_cut"], cut["documents"], cut["queries_cut"], *caps),
            )
