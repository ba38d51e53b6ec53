"""Training, evaluating, exporting and scoring with any run: one entry point each.

The runner finds the family object (``core.model_spec.RunFamily``) once: a config's by
its model, a run directory or an export by the family that claims it (the default
family takes the rest), a ``ServedModel`` by its kind; the family does the work. The
runner does once what every kind shares: recording evaluations in ``metrics.json``.

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
from tfr_rankformer.core.model_families import TEXT_KIND
from tfr_rankformer.core.model_spec import RunFamily
from tfr_rankformer.core.run_layout import METRICS_NAME
from tfr_rankformer.core.run_results import RunMetrics, SplitMetrics
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.serving.client_tokenizer import ClientTokenizer
from tfr_rankformer.serving.prediction import ScoredList, ServedModel
from tfr_rankformer.serving.serving_checks import check_policy
from tfr_rankformer.serving.serving_client import DEFAULT_TIMEOUT, ServingError, connect
from tfr_rankformer.training.train_config import TrainConfig

__all__ = ["train", "evaluate", "export_run", "predict", "load_served", "load_remote"]


def _family_at(path: str) -> RunFamily:
    """The family of the run or export at ``path``: the first whose ``owns`` claims it,
    else the default family."""
    default = None
    for record in model_families.families():
        if record.default:
            default = record
        elif (family := record.load()).owns(path):
            return family
    if default is None:
        raise LookupError("no model family is registered as the default (`default=True`)")
    return default.load()


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
    """Trains a run of any kind, keeps its weights, evaluates every split; returns
    ``metrics.json``'s content (``{}`` on a multi-worker job's non-chief workers).

    ``verbose``: the neural models' progress output (progress lines every
    ``progress_seconds`` where no terminal shows the bar); ``final_weights``: neural
    models also write the weights training ended with to this ``.npz``; ``callbacks``:
    extra Keras (or LightGBM) callbacks run after the run's own; ``existing``:
    ``refuse``, ``resume`` or ``overwrite`` a run already in ``model_dir``.
    """
    family = model_families.family_of(config.model).load()
    return family.train(
        config,
        verbose=verbose,
        final_weights=final_weights,
        callbacks=callbacks,
        progress_seconds=progress_seconds,
        existing=existing,
    )


# === Evaluation ===


def evaluate(
    model_dir: str, *, data_dir: str | None = None, splits: list[str] | None = None
) -> dict[str, SplitMetrics]:
    """Evaluates a trained run on ``splits`` of ``data_dir`` (default: every split of its
    training data); merges the results into ``model_dir/metrics.json`` (another dataset's
    under ``"<split>@<data_dir>"``) and returns them.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained run.
      ValueError: the data does not match the model, or a shard is cut short or corrupt
        (``record_checks.RecordFileError``, naming file and record).
    """
    evaluator = _family_at(model_dir).evaluator(model_dir, data_dir)
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


def export_run(
    model_dir: str,
    *,
    version: int | None = None,
    invalid_items: str = "reject",
    precision: str = "float32",
) -> str:
    """Exports a trained neural run's best weights to ``model_dir/export/<version>``;
    returns that path. A feature-vector run's SavedModel takes ELWC and feature tensors;
    a text run's takes raw strings, and ``export_token_ids/<version>`` token ids.
    ``invalid_items`` (``serving_checks``) applies to feature vectors only, ``precision``
    (``float32`` or ``bf16`` compute) to text runs only.

    Raises:
      FileNotFoundError: if ``model_dir`` is not a trained run.
      FileExistsError: if the version directory exists.
      ValueError: for an unknown ``invalid_items`` policy, or a ``precision`` the run's
        family does not export in.
    """
    check_policy(invalid_items)
    family = _family_at(model_dir)
    return family.export(
        model_dir, version=version, invalid_items=invalid_items, precision=precision
    )


# === Scoring ===


def load_served(model: str) -> ServedModel:
    """Opens ``model`` to score with: a GBDT run directory (its ``model.txt``), an
    ``export/<version>`` directory (a text run's ``export_token_ids/<version>`` too),
    or a run directory (its newest ``export/<version>``).

    Raises:
      FileNotFoundError: if ``model`` is none of these.
    """
    return _family_at(model).load(model)


def load_remote(
    url: str, *, timeout: float = DEFAULT_TIMEOUT, wait: float = 0.0, tokenizer: str | None = None
) -> ServedModel:
    """Opens the export a TF Serving serves at ``url`` (``http://host:8501/v1/models/NAME``
    or ``grpc://host:8500/NAME``) for ``predict``: a feature-vector export, or a Listformer's
    (a token-id export needs ``tokenizer``, its ``export_token_ids/<version>`` directory).
    ``wait``: seconds to wait for the model to be AVAILABLE.

    Raises:
      ValueError: ``url`` is not a TF Serving model URL.
      ServingError: the server cannot be reached, errs, or serves another kind of model.
    """
    remote = connect(url, timeout=timeout, wait=wait)
    try:
        kind = remote.kind
        if kind == TEXT_KIND and "query_ids" in remote.text_inputs():
            if tokenizer is None:
                raise ServingError(
                    f"{url} serves a token-id export: give its export_token_ids/<version> "
                    "directory for the client's tokenizer (--tokenizer)"
                )
            client = ClientTokenizer.from_export(tokenizer)
            return ServedModel(remote.url, kind, None, remote, client)
    except BaseException:
        remote.close()
        raise
    num_features = None if kind == TEXT_KIND else remote.num_features
    return ServedModel(remote.url, kind, num_features, remote)


def predict(
    model: str | ServedModel,
    lists: Iterable | None = None,
    *,
    files: list[str] | None = None,
    batch_size: int | None = None,
) -> Iterator[ScoredList]:
    """Scores lists with a trained model: a feature-vector or text run's export, or a GBDT;
    yields them in input order, scored as they are read.

    Args:
      model: a path ``load_served`` opens, or what it returned.
      lists: ``(qid, docids, [n, d] raw features)`` for feature vectors and GBDTs,
        ``(qid, docids, query text, document texts)`` for text models.
      files: ELWC TFRecord shards to score instead of ``lists`` (not for text models).
      batch_size: lists per model call at most; ``None``: 256, 16 for text models.

    Raises:
      ValueError: neither or both of ``lists`` and ``files``, or ``files`` for text.
      FileNotFoundError: see ``load_served``.
    """
    served = model if isinstance(model, ServedModel) else load_served(model)
    if (lists is None) == (files is None):
        raise ValueError("predict takes either `lists` or `files`")
    for record in model_families.families():
        if record.kind == served.kind:
            return record.load().score(served, lists, files, batch_size)
    raise ValueError(f"no model family scores {served.kind!r} models")
