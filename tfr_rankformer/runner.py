"""Training, evaluating, exporting and scoring with any run: one entry point each, which
finds the run's family object (``core.model_spec.RunFamily``) once and hands it the work.

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
    """The first family whose ``owns`` claims ``path``, else the default family."""
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
    """Trains a run of any kind and evaluates it; returns ``metrics.json``'s content. The
    options are ``training.loop.train``'s (``callbacks`` may be LightGBM's for a GBDT)."""
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
    """Evaluates a trained run on ``splits`` of ``data_dir`` (default: its training data's
    splits), merged into ``model_dir/metrics.json`` (another dataset's under
    ``"<split>@<data_dir>"``). ``FileNotFoundError`` for no trained run, ``ValueError`` for
    data that does not match or a corrupt shard."""
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
    """Exports a trained neural run's best weights to ``model_dir/export/<version>`` (a text
    run's also to ``export_token_ids/<version>``); returns that path. ``invalid_items``
    (``serving_checks``) is for feature vectors, ``precision`` (float32, bf16) for text."""
    check_policy(invalid_items)
    family = _family_at(model_dir)
    return family.export(
        model_dir, version=version, invalid_items=invalid_items, precision=precision
    )


# === Scoring ===


def load_served(model: str) -> ServedModel:
    """Opens ``model`` to score with: a GBDT run, an export, or a run directory (its newest
    export); ``FileNotFoundError`` for anything else."""
    return _family_at(model).load(model)


def load_remote(
    url: str, *, timeout: float = DEFAULT_TIMEOUT, wait: float = 0.0, tokenizer: str | None = None
) -> ServedModel:
    """Opens the export TF Serving serves at ``url`` (``http://host:8501/v1/models/NAME``
    or ``grpc://host:8500/NAME``) for ``predict``, waiting up to ``wait`` seconds for it; a
    token-id export needs ``tokenizer``, its ``export_token_ids/<version>`` directory."""
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
    """Yields the scored lists in input order. ``model``: a path ``load_served`` opens, or
    what it returned; ``lists``: ``(qid, docids, [n, d] raw features)``, or ``(qid, docids,
    query, documents)`` for text; ``files``: ELWC shards instead (not for text);
    ``batch_size``: lists per call (``None``: 256, 16 for text)."""
    served = model if isinstance(model, ServedModel) else load_served(model)
    if (lists is None) == (files is None):
        raise ValueError("predict takes either `lists` or `files`")
    for record in model_families.families():
        if record.kind == served.kind:
            return record.load().score(served, lists, files, batch_size)
    raise ValueError(f"no model family scores {served.kind!r} models")
