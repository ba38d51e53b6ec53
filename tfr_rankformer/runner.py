"""Training, evaluating, exporting and scoring with any run: one entry point each.

A run is a feature-vector model's (trained by ``training``; ``feature_runs``,
``export``), a text model's (the Listformer: trained by ``training`` too;
``text_runs``, ``text_export``) or a GBDT's (``gbdt``). The runner looks the
implementation up in ``model_families``: settings by their model's family, a
run directory or an export by the family whose plug-in claims it (the
feature-vector family takes the rest), a ``ServedModel`` by its kind; the
family's runner plug-in (``run_kinds``) does the work. The runner does once
what every kind shares: recording evaluations in ``metrics.json``. The command
lines, the experiment runner and the search go through here; the families'
modules never import each other.

>>> from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
>>> train(GBDTConfig(model="gbdt", data="d", model_dir="m"), final_weights="w.npz")
Traceback (most recent call last):
ValueError: final_weights: for the neural models only
>>> predict(ServedModel("export/1", "features", 3, model=None))
Traceback (most recent call last):
ValueError: predict takes either `lists` or `files`
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator

from tfr_rankformer.core import model_families
from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.core.model_families import FEATURES_KIND
from tfr_rankformer.core.run_layout import METRICS_NAME
from tfr_rankformer.core.run_results import RunMetrics, SplitMetrics
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.ranking.evaluation import RunEvaluator
from tfr_rankformer.serving.prediction import ScoredList, ServedModel
from tfr_rankformer.serving.serving_checks import check_policy
from tfr_rankformer.serving.serving_client import DEFAULT_TIMEOUT, ServingError, connect
from tfr_rankformer.training.train_config import TrainConfig

__all__ = [
    "train",
    "evaluate",
    "export_run",
    "predict",
    "load_served",
    "load_remote",
    "ServedModel",
]


def _runs_at(path: str):
    """The runner plug-in of the run or export at ``path``: the first family whose
    plug-in claims it (``owns``), else the default family's."""
    default = None
    for family in model_families.families():
        if family.default:
            default = family
            continue
        runs = family.load_runs()
        if runs.owns(path):
            return runs
    if default is None:
        raise LookupError("no model family is registered as the default (`default=True`)")
    return default.load_runs()


def _runs_of_kind(kind: str):
    """The runner plug-in that scores a ``ServedModel`` of ``kind``."""
    for family in model_families.families():
        if family.kind == kind:
            return family.load_runs()
    raise ValueError(f"no model family scores {kind!r} models")


# === Training ===


def train(
    config: TrainConfig | GBDTConfig,
    *,
    verbose: int = 1,
    final_weights: str | None = None,
    callbacks: list | None = None,
    progress_seconds: float = 30.0,
    existing: str = "refuse",
) -> RunMetrics:
    """Trains a run of any kind, keeps its weights, evaluates every split.

    Args:
      config: a neural model's settings (feature vectors or text) or a GBDT's.
      verbose: the neural models' progress output. Where no terminal shows
        the bar, ``1`` becomes progress lines every ``progress_seconds``.
      final_weights: neural models: also write the weights training ended with
        (before the best ones are reloaded) to this ``.npz`` file.
      callbacks: extra callbacks, run after the run's own: Keras ones for
        neural models (e.g. a search's pruning), LightGBM ones for GBDTs.
      progress_seconds: see ``verbose``.
      existing: what to do with a run already in ``model_dir``: ``refuse``,
        ``resume`` (neural models) or ``overwrite`` (see ``run_directory``).

    Returns:
      ``metrics.json``'s content; ``{}`` on a multi-worker job's non-chief workers.

    Raises:
      ValueError: for ``final_weights`` with a GBDT, or bad settings or data.
    """
    runs = model_families.family_of(config.model).load_runs()
    return runs.train(
        config,
        verbose=verbose,
        final_weights=final_weights,
        callbacks=callbacks,
        progress_seconds=progress_seconds,
        existing=existing,
    )


# === Evaluation ===


def _evaluator(model_dir: str, data_dir: str | None) -> RunEvaluator:
    return _runs_at(model_dir).evaluator(model_dir, data_dir)


def evaluate(
    model_dir: str, *, data_dir: str | None = None, splits: list[str] | None = None
) -> dict[str, SplitMetrics]:
    """Evaluates a trained run (feature-vector, text or GBDT) on ``splits`` of
    ``data_dir`` (default: every split of its training data).

    The results are merged into ``model_dir/metrics.json`` (a different dataset
    is recorded under ``"<split>@<data_dir>"``) and returned.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained run.
      ValueError: the data does not match the model, the manifest does not
        parse, or a shard is cut short or corrupt
        (``record_checks.RecordFileError``, naming file and record).
    """
    evaluator = _evaluator(model_dir, data_dir)
    splits = splits or evaluator.splits
    if evaluator.check is not None:
        evaluator.check(splits)
    same_data = os.path.abspath(evaluator.data_dir) == os.path.abspath(evaluator.trained_on)
    results: dict[str, SplitMetrics] = {}
    for split in splits:
        key = split if same_data else f"{split}@{evaluator.data_dir}"
        results[key] = evaluator.evaluate(split)
    path = os.path.join(model_dir, METRICS_NAME)
    stored = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            stored = json.load(f)
    stored.update(results)
    write_json(path, stored)
    return results


# === Export ===


def export_run(model_dir: str, *, version: int | None = None, invalid_items: str = "reject") -> str:
    """Exports a trained neural run's best weights to ``model_dir/export/<version>``;
    returns that path.

    A feature-vector run's SavedModel takes ELWC and feature tensors
    (``export``); a text run's takes raw strings (``text_export``) and has no
    item features to check, so ``invalid_items`` (see ``serving_checks``) is
    checked but applies to feature vectors only. A text run also gets
    ``model_dir/export_token_ids/<version>``, the same model taking token ids
    with no TF Text op (``text_export``); the path returned is the raw-string one.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained run.
      FileExistsError: if the version directory exists.
      ValueError: for an unknown ``invalid_items`` policy.
    """
    check_policy(invalid_items)
    return _runs_at(model_dir).export(model_dir, version=version, invalid_items=invalid_items)


# === Scoring ===


def load_served(model: str) -> ServedModel:
    """Opens ``model`` to score with: a GBDT run directory (its ``model.txt``), an
    ``export/<version>`` directory (a text run's ``export_token_ids/<version>`` too),
    or a run directory (its newest ``export/<version>``).

    Raises:
      FileNotFoundError: if ``model`` is none of these.
    """
    return _runs_at(model).load(model)


def load_remote(url: str, *, timeout: float = DEFAULT_TIMEOUT) -> ServedModel:
    """Opens the feature-vector export a TF Serving serves at ``url``
    (``http://host:8501/v1/models/NAME`` or ``grpc://host:8500/NAME``), to score
    through it with ``predict`` as with a local export.

    Raises:
      ValueError: ``url`` is not a TF Serving model URL.
      ServingError: the server cannot be reached, answers with an error, or
        serves another kind of model (``serving_client``).
    """
    remote = connect(url, timeout=timeout)
    try:
        num_features = remote.num_features
    except ServingError:
        remote.close()
        raise
    return ServedModel(remote.url, FEATURES_KIND, num_features, remote)


def predict(
    model: str | ServedModel,
    lists: Iterable | None = None,
    *,
    files: list[str] | None = None,
    batch_size: int | None = None,
) -> Iterator[ScoredList]:
    """Scores lists with a trained model: a feature-vector or text run's export, or a GBDT.

    Args:
      model: a path ``load_served`` opens, or what it returned (whose
        ``num_features`` reading LETOR lists needs first).
      lists: the lists: ``(qid, docids, [n, d] raw features)`` for
        feature-vector models and GBDTs, ``(qid, docids, query text, document
        texts)`` for text models (a token-id export is given the ids of its
        client tokenizer, so either export of a text run scores alike).
      files: ELWC TFRecord shards to score instead of ``lists`` (feature-vector
        models and GBDTs; items are numbered in list order).
      batch_size: lists per model call at most; ``None``: 256, 16 for text
        models (as their evaluation).

    Returns:
      The scored lists in input order, scored as they are read.

    Raises:
      ValueError: neither or both of ``lists`` and ``files``, or ``files`` for
        a text model.
      FileNotFoundError: see ``load_served``.
    """
    served = model if isinstance(model, ServedModel) else load_served(model)
    if (lists is None) == (files is None):
        raise ValueError("predict takes either `lists` or `files`")
    return _runs_of_kind(served.kind).score(served, lists, files, batch_size)
