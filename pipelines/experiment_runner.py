"""``tfr-experiment``: the RankFormer paper's Table 2 on one dataset, resumable.

Converts the dataset (or reuses a conversion), trains and evaluates every
model on every fold and seed, and writes to ``output/``:

* ``data/``: the converted dataset (``FoldN/`` per fold);
* ``runs/<model>/Fold<f>/seed<s>/``: each run's directory (``metrics.json``
  marks a finished run, which a rerun skips; a run without it was
  interrupted and restarts from scratch);
* ``results.json``: every run's metrics, settings and timing, plus versions;
* ``results.md``: test NDCG_y@10 and NDCG_r@10 per model, mean ± standard
  error over runs, the best two per column in bold;
* PNG plots (see ``experiment_plots``).

The models and folds are parsed by ``experiment_specs``, the table made by
``experiment_summary``. Orchestrating conversion and training is a program's
job, so this lives beside the command lines, not in the library.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import platform
import re
import shutil
import time

from pipelines.experiment_specs import (
    ARCHITECTURE_FIELDS,
    ExperimentConfig,
    ModelSpec,
    parse_folds,
    parse_models,
    tuned_specs,
)
from pipelines.experiment_summary import format_table, summarize
from tfr_rankformer import data, gbdt
from tfr_rankformer.config_io import write_json
from tfr_rankformer.training import TrainConfig, train

__all__ = ["prepare_data", "run_experiment"]

logger = logging.getLogger(__name__)


def _is_single_set(root: str) -> bool:
    """Whether ``root`` is one converted set (its manifest at the top), not ``FoldN/``s."""
    return os.path.isfile(os.path.join(root, "manifest.json"))


def _converted_folds(root: str) -> dict[int, str]:
    """Fold number -> converted directory under ``root`` (``{1: root}`` without folds)."""
    if _is_single_set(root):
        return {1: root}
    folds = {}
    for name in os.listdir(root) if os.path.isdir(root) else []:
        match = re.fullmatch(r"Fold(\d+)", name)
        if match and os.path.isfile(os.path.join(root, name, "manifest.json")):
            folds[int(match.group(1))] = os.path.join(root, name)
    return folds


def prepare_data(config: ExperimentConfig, *, progress: bool) -> dict[int, str]:
    """The converted folds the experiment uses: the dataset itself when it is
    already converted, else ``output/data`` (converted once)."""
    folds = _converted_folds(config.dataset)
    if not folds:
        target = os.path.join(config.output, "data")
        folds = _converted_folds(target)
        if not folds:
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
            folds = _converted_folds(target)
    wanted = parse_folds(config.folds)
    if _is_single_set(folds[min(folds)]) and len(folds) == 1 and wanted != [1]:
        logger.warning("the dataset has no folds: running fold 1 (its only set) alone")
        wanted = [1]
    missing = sorted(set(wanted) - set(folds))
    if missing:
        raise ValueError(f"the dataset has folds {sorted(folds)}, not {missing}")
    return {fold: folds[fold] for fold in wanted}


def _train_one(spec: ModelSpec, fold_data: str, run_dir: str, seed: int, config) -> dict:
    if spec.tuned is not None:
        values = {**spec.tuned, "data": fold_data, "model_dir": run_dir, "seed": seed}
        if spec.is_gbdt:
            return gbdt.train_gbdt(gbdt.GBDTConfig.from_json(values))
        return train(TrainConfig.from_json(values), verbose=0)
    settings = dict(spec.settings)
    if spec.is_gbdt:
        gbdt_fields = {f.name for f in dataclasses.fields(gbdt.GBDTConfig)}
        own = {k: v for k, v in settings.items() if k in gbdt_fields}
        params = {k: v for k, v in settings.items() if k not in gbdt_fields}
        return gbdt.train_gbdt(
            gbdt.GBDTConfig.from_json(
                {
                    "model": spec.model,
                    "data": fold_data,
                    "model_dir": run_dir,
                    "seed": seed,
                    **own,
                    "params": params,
                }
            )
        )
    values = {"model": spec.model, "data": fold_data, "model_dir": run_dir, "seed": seed}
    for key, default in (("epochs", config.epochs), ("batch_size", config.batch_size)):
        if default is not None:
            values[key] = default
    if config.patience is not None:
        values["patience"] = config.patience
    architecture = {k: v for k, v in settings.items() if k in ARCHITECTURE_FIELDS}
    values.update({k: v for k, v in settings.items() if k not in ARCHITECTURE_FIELDS})
    values["architecture"] = architecture
    return train(TrainConfig.from_json(values), verbose=0)


def _versions() -> dict:
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for package in ("tfr-rankformer", "tensorflow", "tensorflow-ranking", "lightgbm", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def run_experiment(config: ExperimentConfig, *, progress: bool = True) -> dict:
    """Runs (or resumes) the experiment; returns ``results.json``'s content."""
    from tqdm.auto import tqdm

    specs = parse_models(config.models)
    if config.tuned:
        specs += tuned_specs(config.tuned)
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ValueError(f"model labels repeat: {labels}")
    os.makedirs(config.output, exist_ok=True)
    folds = prepare_data(config, progress=progress)
    plan = [(spec, fold, seed) for fold in folds for seed in range(config.seeds) for spec in specs]
    runs = []
    bar = tqdm(plan, unit="run", disable=None if progress else True)
    for spec, fold, seed in bar:
        run_dir = os.path.join(config.output, "runs", spec.slug, f"Fold{fold}", f"seed{seed}")
        metrics_path = os.path.join(run_dir, "metrics.json")
        bar.set_description(f"{spec.label} Fold{fold} seed{seed}")
        if not os.path.isfile(metrics_path):
            if os.path.isdir(run_dir):
                logger.info("%s was interrupted: starting it again", run_dir)
                shutil.rmtree(run_dir)
            started = time.perf_counter()
            _train_one(spec, folds[fold], run_dir, seed, config)
            logger.info("%s: %.0f s", run_dir, time.perf_counter() - started)
        with open(metrics_path, encoding="utf-8") as f:
            metrics = json.load(f)
        runs.append(
            {
                "model": spec.label,
                "fold": fold,
                "seed": seed,
                "run_dir": run_dir,
                "metrics": {k: v for k, v in metrics.items() if k not in ("settings",)},
                "settings": metrics.get("settings"),
                "seconds": metrics.get("training", {}).get("seconds"),
            }
        )
    manifest = data.load_manifest(folds[min(folds)])
    results = {
        "dataset": config.dataset,
        "label_kind": manifest.get("label_kind"),
        "folds": sorted(folds),
        "seeds": config.seeds,
        "models": [s.label for s in specs],
        "settings": dataclasses.asdict(config),
        "versions": _versions(),
        "runs": runs,
        "summary": summarize(runs, [s.label for s in specs]),
    }
    write_json(os.path.join(config.output, "results.json"), results)
    with open(os.path.join(config.output, "results.md"), "w", encoding="utf-8") as f:
        f.write(format_table(results))
    from pipelines import experiment_plots

    results["plots"] = experiment_plots.draw_all(config.output, results, folds, specs)
    write_json(os.path.join(config.output, "results.json"), results)
    return results
