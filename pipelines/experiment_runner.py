"""``tfr-experiment``: the RankFormer paper's Table 2 on one dataset, resumable.

Every model on every fold and seed runs into ``output/runs/<model>/Fold<f>/seed<s>/``; its
``metrics.json`` marks it finished, and a rerun keeps it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import platform
import re
import shutil
import time
from collections.abc import Callable

from pipelines.experiment_specs import ExperimentConfig, ModelSpec, parse_folds
from pipelines.experiment_stages import StageLog
from pipelines.experiment_summary import (
    PAIRED,
    REPORTED,
    TEXT_REPORTED,
    format_table,
    paired_runs,
    summarize,
)
from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.inputs.manifest import MANIFEST_NAME, load_manifest, read_manifest
from tfr_rankformer.runner import train
from tfr_rankformer.training.train_config import TrainConfig
from tfrecords_tools.text.text_dataset import is_text_dataset
from tfrecords_tools.text.text_sources import is_text_input

logger = logging.getLogger(__name__)


def _is_single_set(root: str) -> bool:
    """Whether ``root`` is one converted set (its manifest at the top), not ``FoldN/``s."""
    return os.path.isfile(os.path.join(root, MANIFEST_NAME))


def converted_folds(root: str) -> dict[int, str]:
    """Fold number -> converted directory under ``root`` (``{1: root}`` without folds).

    >>> converted_folds("/nowhere")
    {}
    """
    if _is_single_set(root):
        return {1: root}
    folds = {}
    for name in os.listdir(root) if os.path.isdir(root) else []:
        match = re.fullmatch(r"Fold(\d+)", name)
        if match and _is_single_set(os.path.join(root, name)):
            folds[int(match.group(1))] = os.path.join(root, name)
    return folds


def _check_text_settings(config: ExperimentConfig) -> None:
    from tfrecords_tools.text.text_sources import TREC_PREFIX

    if not config.simulate_clicks:
        raise ValueError(
            f"--no-simulation does not apply to {config.dataset}: text data keeps its "
            "relevance judgements"
        )
    if config.dataset == TREC_PREFIX:
        raise ValueError(
            f"--dataset {TREC_PREFIX} takes its files from tfr-convert's flags: convert "
            f"with tfr-convert --input {TREC_PREFIX} --queries ... --output DIR and pass "
            f"DIR, or name a directory of the usual file names as {TREC_PREFIX}:DIR"
        )


def _convert(config: ExperimentConfig, target: str, *, progress: bool) -> None:
    lists = config.synthetic_lists
    sizes = dict(train_queries=lists, vali_queries=max(lists // 3, 1))
    sizes["test_queries"] = sizes["vali_queries"]
    if is_text_input(config.dataset):
        from tfrecords_tools.text import text_sources as sources
        from tfrecords_tools.text.synthetic_text import SyntheticTextConfig
        from tfrecords_tools.text.trec_convert import TrecConfig, convert_trec

        if config.dataset == sources.SYNTHETIC_TEXT:
            text = SyntheticTextConfig(**sizes)
            sources.convert_synthetic_text(text, output=target, overwrite=True, progress=progress)
        elif config.dataset.startswith(sources.TREC_PREFIX + ":"):
            files = sources.find_trec_files(config.dataset[len(sources.TREC_PREFIX) + 1 :])
            trec = TrecConfig.from_json({"output": target, "overwrite": True, **files})
            convert_trec(trec, progress=progress)
        return
    from tfrecords_tools.convert import ConvertConfig, convert
    from tfrecords_tools.synthetic import SyntheticConfig

    settings = ConvertConfig(
        input=config.dataset,
        output=target,
        data_dir=config.data_dir,
        all_folds=True,
        simulate_clicks=config.simulate_clicks,
        synthetic=SyntheticConfig(**sizes),
        overwrite=True,
    )
    convert(settings, progress=progress)


def _converted_once(source: str, target: str, run: Callable[[], object], stages) -> dict:
    """``target``'s folds, after ``run`` converts ``source`` into it when it holds none."""
    folds = converted_folds(target)
    if folds:
        stages.note("using the data converted before in %s", target)
        return folds
    with stages.stage(f"convert {source} into {target}"):
        run()
    return converted_folds(target)


def convert_folds(
    convert_config, *, progress: bool, stages: StageLog | None = None
) -> dict[int, str]:
    """Fold number -> directory of ``convert_config``'s output, converted unless it is there."""
    from tfrecords_tools.convert import convert

    run = functools.partial(convert, convert_config, progress=progress)
    return _converted_once(convert_config.input, convert_config.output, run, stages or StageLog())


def prepare_data(
    config: ExperimentConfig, *, progress: bool, stages: StageLog | None = None
) -> dict[int, str]:
    """The experiment's converted folds: the dataset's own, else ``output/data``'s."""
    folds = converted_folds(config.dataset)
    if not folds:
        target = os.path.join(config.output, "data")
        run = functools.partial(_convert, config, target, progress=progress)
        folds = _converted_once(config.dataset, target, run, stages or StageLog())
    wanted = parse_folds(config.folds)
    if _is_single_set(folds[min(folds)]) and len(folds) == 1 and wanted != [1]:
        logger.warning("the dataset has no folds: running fold 1 (its only set) alone")
        wanted = [1]
    missing = sorted(set(wanted) - set(folds))
    if missing:
        raise ValueError(f"the dataset has folds {sorted(folds)}, not {missing}")
    return {fold: folds[fold] for fold in wanted}


def _run_bm25(spec: ModelSpec, fold_data: str, run_dir: str) -> None:
    from tfrecords_tools.text.bm25_run import Bm25Config, evaluate_bm25_splits

    bm25 = Bm25Config(**dict(spec.settings))
    started = time.perf_counter()
    available = read_manifest(os.path.join(fold_data, MANIFEST_NAME)).splits
    splits = [s for s in ("vali", "test") if s in available]
    metrics = {}
    for split, found in evaluate_bm25_splits(fold_data, splits, config=bm25).items():
        metrics[split] = {
            "ndcg_y@" + k.split("@")[1]: v for k, v in found.items() if k.startswith("ndcg@")
        }
        metrics[split].update(num_lists=found["num_lists"], num_lists_y=found["num_lists_counted"])
    metrics["settings"] = {"model": spec.model, **dataclasses.asdict(bm25)}
    metrics["training"] = {"seconds": time.perf_counter() - started}
    os.makedirs(run_dir, exist_ok=True)
    write_json(os.path.join(run_dir, "metrics.json"), metrics)


def _train_one(spec: ModelSpec, fold_data: str, run_dir: str, seed: int, config, fit: dict):
    """Trains and evaluates one run; ``fit``: ``runner.train``'s display options."""
    if spec.is_bm25:
        return _run_bm25(spec, fold_data, run_dir)
    where = {"data": fold_data, "model_dir": run_dir, "seed": seed}
    if spec.tuned is not None:
        values = {**spec.tuned, **where}
        if spec.is_gbdt:
            return train(GBDTConfig.from_json(values))
        return train(TrainConfig.from_flat(values), **fit)
    settings = dict(spec.settings)
    if spec.is_gbdt:  # GBDTConfig fields, the rest LightGBM parameters
        fields = {f.name for f in dataclasses.fields(GBDTConfig)}
        own = {k: v for k, v in settings.items() if k in fields}
        params = {k: v for k, v in settings.items() if k not in fields}
        return train(GBDTConfig.from_json({"model": spec.model, **where, **own, "params": params}))
    common = {k: getattr(config, k) for k in ("epochs", "batch_size", "patience")}
    common = {k: v for k, v in common.items() if v is not None}
    return train(TrainConfig.from_flat({"model": spec.model, **where, **common, **settings}), **fit)


def _versions() -> dict:
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for package in ("tfr-rankformer", "tensorflow", "tensorflow-ranking", "lightgbm", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _run_once(config, planned: tuple, fold_data: str, name: str, stages, fit: dict) -> dict:
    """One ``(spec, fold, seed)`` run, trained unless its metrics exist; its results entry."""
    spec, fold, seed = planned
    run_dir = os.path.join(config.output, "runs", spec.slug, f"Fold{fold}", f"seed{seed}")
    metrics_path = os.path.join(run_dir, "metrics.json")
    if os.path.isfile(metrics_path):
        stages.note("%s: finished before, kept (%s)", name, run_dir)
    else:
        if os.path.isdir(run_dir):
            logger.info("%s was interrupted: starting it again", run_dir)
            shutil.rmtree(run_dir)
        with stages.stage(name):
            _train_one(spec, fold_data, run_dir, seed, config, fit)
    with open(metrics_path, encoding="utf-8") as f:
        metrics = json.load(f)
    return {
        "model": spec.label,
        "fold": fold,
        "seed": seed,
        "run_dir": run_dir,
        "metrics": {k: v for k, v in metrics.items() if k != "settings"},
        "settings": metrics.get("settings"),
        "seconds": metrics.get("training", {}).get("seconds"),
    }


def _results(config: ExperimentConfig, specs: list, folds: dict, runs: list, text: bool) -> dict:
    label_kind = "relevance" if text else load_manifest(folds[min(folds)]).label_kind
    reported = TEXT_REPORTED if text else REPORTED
    paired = TEXT_REPORTED if text else PAIRED
    labels = [s.label for s in specs]
    return {
        "dataset": config.dataset,
        "kind": "text" if text else "features",
        "reported": list(reported),
        "label_kind": label_kind,
        "folds": sorted(folds),
        "seeds": config.seeds,
        "models": labels,
        "settings": dataclasses.asdict(config),
        "versions": _versions(),
        "runs": runs,
        "summary": summarize(runs, labels, keys=reported),
        "paired_keys": list(paired),
        "paired": paired_runs(runs, labels, paired),
    }


def run_experiment(
    config: ExperimentConfig,
    *,
    progress: bool = True,
    progress_seconds: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Runs (or resumes) the experiment; returns ``results.json``'s content. ``progress``:
    bars on a terminal, elsewhere a line every ``progress_seconds``."""
    stages = StageLog(clock=clock)
    given = converted_folds(config.dataset)
    # The models are checked against the data before anything is converted.
    text = is_text_input(config.dataset) or bool(given and is_text_dataset(given[min(given)]))
    specs = config.model_specs(text=text)
    if text:
        _check_text_settings(config)
    os.makedirs(config.output, exist_ok=True)
    folds = prepare_data(config, progress=progress, stages=stages)
    plan = [
        (spec, fold, seed)
        for fold in folds
        for seed in range(config.seeds)
        for spec in specs
        if seed == 0 or not spec.is_bm25  # BM25 is deterministic: one run per fold
    ]
    fit = {"verbose": 1 if progress else 0, "progress_seconds": progress_seconds}
    runs = []
    for i, (spec, fold, seed) in enumerate(plan, start=1):
        name = f"run {i}/{len(plan)} {spec.label} Fold{fold} seed{seed}"
        runs.append(_run_once(config, (spec, fold, seed), folds[fold], name, stages, fit))
    with stages.stage("results.md, results.json and plots"):
        results = _results(config, specs, folds, runs, text)
        write_json(os.path.join(config.output, "results.json"), results)
        with atomic_write(os.path.join(config.output, "results.md")) as f:
            f.write(format_table(results))
        from pipelines import experiment_plots

        results["plots"] = experiment_plots.draw_all(config.output, results, folds, specs)
        write_json(os.path.join(config.output, "results.json"), results)
    return results
