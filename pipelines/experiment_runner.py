"""``tfr-experiment``: the RankFormer paper's Table 2 on one dataset, resumable.

Converts the dataset (or reuses a conversion), trains and evaluates every
model on every fold and seed, and writes to ``output/``:

* ``data/``: the converted dataset (``FoldN/`` per fold);
* ``runs/<model>/Fold<f>/seed<s>/``: each run's directory (``metrics.json``
  marks a finished run, which a rerun skips; a run without it was
  interrupted and restarts from scratch);
* ``results.json``: every run's metrics, settings and timing, plus versions;
* ``results.md``: test NDCG_y@10 and NDCG_r@10 per model (on text data,
  NDCG@1, @5 and @10 on the relevance judgements), mean ± standard error
  over runs, the best two per column in bold; then every pair of models
  compared run by run (the later model minus the earlier: the mean ±
  standard error of their differences over the folds and seeds both ran, and
  on how many the later is ahead), with
  NDCG_y@10 on the lists whose label is the highest level beside them;
* PNG plots (see ``experiment_plots``).

Each stage (the conversion, every run, the table and plots) logs a line when
it starts and when it ends (``experiment_stages``); between them a neural run
logs ``tfr-train``'s progress lines where no terminal shows Keras's bar, and a
GBDT its validation NDCG every 50 trees and after a tree that ends 20 s
after its last line.

Text data (``synthetic-text``, ``trec:DIR`` or a text ``tfr-convert`` output)
runs ``bm25`` and the ``listformer``; BM25 is deterministic, so it runs once
per fold whatever ``seeds`` says. The models and folds are parsed by
``experiment_specs``, the table made by ``experiment_summary``.
Orchestrating conversion and training is a program's job, so this lives
beside the command lines, not in the library.
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
from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.manifest import MANIFEST_NAME, read_manifest
from tfr_rankformer.runner import train
from tfr_rankformer.training.train_config import TrainConfig
from tfrecords_tools.text.text_dataset import is_text_dataset
from tfrecords_tools.text.text_sources import is_text_input

__all__ = ["convert_folds", "converted_folds", "prepare_data", "run_experiment"]

logger = logging.getLogger(__name__)


def _is_single_set(root: str) -> bool:
    """Whether ``root`` is one converted set (its manifest at the top), not ``FoldN/``s."""
    return os.path.isfile(os.path.join(root, "manifest.json"))


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
        if match and os.path.isfile(os.path.join(root, name, "manifest.json")):
            folds[int(match.group(1))] = os.path.join(root, name)
    return folds


def _convert_text(config: ExperimentConfig, target: str, *, progress: bool) -> None:
    from tfrecords_tools.text.synthetic_text import SyntheticTextConfig
    from tfrecords_tools.text.text_sources import (
        SYNTHETIC_TEXT,
        TREC_PREFIX,
        convert_synthetic_text,
        find_trec_files,
    )
    from tfrecords_tools.text.trec_convert import TrecConfig, convert_trec

    if config.dataset == SYNTHETIC_TEXT:
        lists = config.synthetic_lists
        synthetic = SyntheticTextConfig(
            train_queries=lists,
            vali_queries=max(lists // 3, 1),
            test_queries=max(lists // 3, 1),
        )
        convert_synthetic_text(synthetic, output=target, overwrite=True, progress=progress)
    elif config.dataset.startswith(TREC_PREFIX + ":"):
        files = find_trec_files(config.dataset[len(TREC_PREFIX) + 1 :])
        values = {"output": target, "overwrite": True, **files}
        convert_trec(TrecConfig.from_json(values), progress=progress)


def _check_text_settings(config: ExperimentConfig) -> None:
    """Refuses settings that cannot apply to text data, before anything is written."""
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
    """Converts ``config.dataset`` into ``target`` (its folds, with simulated clicks unless
    the config says otherwise)."""
    if is_text_input(config.dataset):
        _convert_text(config, target, progress=progress)
        return
    from tfrecords_tools.convert import ConvertConfig, convert
    from tfrecords_tools.synthetic import SyntheticConfig

    lists = config.synthetic_lists
    synthetic = SyntheticConfig(
        train_queries=lists,
        vali_queries=max(lists // 3, 1),
        test_queries=max(lists // 3, 1),
    )
    convert(
        ConvertConfig(
            input=config.dataset,
            output=target,
            data_dir=config.data_dir,
            all_folds=True,
            simulate_clicks=config.simulate_clicks,
            synthetic=synthetic,
            overwrite=True,
        ),
        progress=progress,
    )


def convert_folds(
    convert_config, *, progress: bool, stages: StageLog | None = None
) -> dict[int, str]:
    """Fold number -> converted directory under ``convert_config.output``, converted
    with ``convert_config`` (a ``tfrecords_tools.convert.ConvertConfig``) unless a
    conversion is there already (it is written whole or not at all), as one of ``stages``.
    The experiments' conversion; benchmarks that convert LETOR folds call it too."""
    from tfrecords_tools.convert import convert

    return _converted_once(
        convert_config.input,
        convert_config.output,
        lambda: convert(convert_config, progress=progress),
        stages or StageLog(),
    )


def _converted_once(source: str, target: str, run: Callable[[], object], stages) -> dict:
    """``target``'s folds, after ``run`` converts ``source`` into it when it holds none."""
    folds = converted_folds(target)
    if folds:
        stages.note("using the data converted before in %s", target)
    else:
        with stages.stage(f"convert {source} into {target}"):
            run()
        folds = converted_folds(target)
    return folds


def prepare_data(
    config: ExperimentConfig, *, progress: bool, stages: StageLog | None = None
) -> dict[int, str]:
    """The converted folds the experiment uses: the dataset itself when it is
    already converted, else ``output/data`` (converted once, as one of ``stages``)."""
    stages = stages or StageLog()
    folds = converted_folds(config.dataset)
    if not folds:
        target = os.path.join(config.output, "data")
        convert = functools.partial(_convert, config, target, progress=progress)
        folds = _converted_once(config.dataset, target, convert, stages)
    wanted = parse_folds(config.folds)
    if _is_single_set(folds[min(folds)]) and len(folds) == 1 and wanted != [1]:
        logger.warning("the dataset has no folds: running fold 1 (its only set) alone")
        wanted = [1]
    missing = sorted(set(wanted) - set(folds))
    if missing:
        raise ValueError(f"the dataset has folds {sorted(folds)}, not {missing}")
    return {fold: folds[fold] for fold in wanted}


def _run_bm25(spec: ModelSpec, fold_data: str, run_dir: str) -> None:
    """Scores the fold's vali and test lists with BM25; writes ``metrics.json``."""
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


def _gbdt_config(spec: ModelSpec, values: dict) -> GBDTConfig:
    """A GBDT row's settings: ``GBDTConfig`` fields, the rest LightGBM parameters."""
    fields = {f.name for f in dataclasses.fields(GBDTConfig)}
    settings = dict(spec.settings)
    own = {k: v for k, v in settings.items() if k in fields}
    params = {k: v for k, v in settings.items() if k not in fields}
    return GBDTConfig.from_json({**values, **own, "params": params})


def _train_one(spec: ModelSpec, fold_data: str, run_dir: str, seed: int, config, fit: dict) -> dict:
    """Trains and evaluates one run; ``fit``: ``runner.train``'s display options."""
    if spec.is_bm25:
        return _run_bm25(spec, fold_data, run_dir)
    values = {"model": spec.model, "data": fold_data, "model_dir": run_dir, "seed": seed}
    if spec.tuned is not None:
        values = {**spec.tuned, "data": fold_data, "model_dir": run_dir, "seed": seed}
        if spec.is_gbdt:
            return train(GBDTConfig.from_json(values))
        return train(TrainConfig.from_flat(values), **fit)
    if spec.is_gbdt:
        return train(_gbdt_config(spec, values))
    for key, default in (("epochs", config.epochs), ("batch_size", config.batch_size)):
        if default is not None:
            values[key] = default
    if config.patience is not None:
        values["patience"] = config.patience
    return train(TrainConfig.from_flat({**values, **dict(spec.settings)}), **fit)


def _versions() -> dict:
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for package in ("tfr-rankformer", "tensorflow", "tensorflow-ranking", "lightgbm", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


@dataclasses.dataclass(frozen=True)
class _Display:
    """What the runs show while they work: the stage lines, and training's ``verbose``
    and ``progress_seconds`` (``runner.train``'s)."""

    stages: StageLog
    fit: dict


def _run_once(
    config: ExperimentConfig, planned: tuple, fold_data: str, name: str, display: _Display
) -> dict:
    """One (model, fold, seed) run, trained unless its metrics exist; its ``results.json``
    entry. ``planned`` is ``(spec, fold, seed)``; ``name`` is how the stage lines call it."""
    spec, fold, seed = planned
    run_dir = os.path.join(config.output, "runs", spec.slug, f"Fold{fold}", f"seed{seed}")
    metrics_path = os.path.join(run_dir, "metrics.json")
    if os.path.isfile(metrics_path):
        display.stages.note("%s: finished before, kept (%s)", name, run_dir)
    else:
        if os.path.isdir(run_dir):
            logger.info("%s was interrupted: starting it again", run_dir)
            shutil.rmtree(run_dir)
        with display.stages.stage(name):
            _train_one(spec, fold_data, run_dir, seed, config, display.fit)
    with open(metrics_path, encoding="utf-8") as f:
        metrics = json.load(f)
    return {
        "model": spec.label,
        "fold": fold,
        "seed": seed,
        "run_dir": run_dir,
        "metrics": {k: v for k, v in metrics.items() if k not in ("settings",)},
        "settings": metrics.get("settings"),
        "seconds": metrics.get("training", {}).get("seconds"),
    }


def _results(config: ExperimentConfig, specs: list, folds: dict, runs: list, text: bool) -> dict:
    """``results.json``'s content, the plots aside."""
    label_kind = "relevance" if text else data.load_manifest(folds[min(folds)]).label_kind
    reported = TEXT_REPORTED if text else REPORTED
    paired = TEXT_REPORTED if text else PAIRED
    return {
        "dataset": config.dataset,
        "kind": "text" if text else "features",
        "reported": list(reported),
        "label_kind": label_kind,
        "folds": sorted(folds),
        "seeds": config.seeds,
        "models": [s.label for s in specs],
        "settings": dataclasses.asdict(config),
        "versions": _versions(),
        "runs": runs,
        "summary": summarize(runs, [s.label for s in specs], keys=reported),
        "paired_keys": list(paired),
        "paired": paired_runs(runs, [s.label for s in specs], paired),
    }


def run_experiment(
    config: ExperimentConfig,
    *,
    progress: bool = True,
    progress_seconds: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Runs (or resumes) the experiment; returns ``results.json``'s content.

    Args:
      config: the experiment.
      progress: show the conversion's and training's progress: bars on a
        terminal, elsewhere a training progress line every ``progress_seconds``.
        The stage lines (``experiment_stages``) are logged either way.
      progress_seconds: see ``progress``.
      clock: the stage lines' clock (seconds, monotonic); tests give their own.
    """
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
    # verbose 1: Keras's bar on a terminal, progress lines elsewhere (runner.train).
    fit = {"verbose": 1 if progress else 0, "progress_seconds": progress_seconds}
    display = _Display(stages=stages, fit=fit)
    runs = []
    for i, (spec, fold, seed) in enumerate(plan, start=1):
        name = f"run {i}/{len(plan)} {spec.label} Fold{fold} seed{seed}"
        runs.append(_run_once(config, (spec, fold, seed), folds[fold], name, display))
    with stages.stage("results.md, results.json and plots"):
        results = _results(config, specs, folds, runs, text)
        write_json(os.path.join(config.output, "results.json"), results)
        with open(os.path.join(config.output, "results.md"), "w", encoding="utf-8") as f:
            f.write(format_table(results))
        from pipelines import experiment_plots

        results["plots"] = experiment_plots.draw_all(config.output, results, folds, specs)
        write_json(os.path.join(config.output, "results.json"), results)
    return results
