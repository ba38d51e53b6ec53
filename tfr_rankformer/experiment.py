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

Models are given as ``NAME[:KEY=VALUE[:KEY=VALUE...]]``, e.g.
``rankformer:alpha=4`` or ``gbdt-1k:num_leaves=63``: the keys are
``tfr-train`` settings (architecture ones included) for neural models and
LightGBM parameters for GBDTs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import platform
import re
import shutil
import time

from tfr_rankformer import data, gbdt
from tfr_rankformer.command_names import DEFAULT_EXPERIMENT_MODELS
from tfr_rankformer.config_io import write_json
from tfr_rankformer.models import MODELS, ModelConfig
from tfr_rankformer.training import TrainConfig, train

__all__ = [
    "ModelSpec",
    "ExperimentConfig",
    "parse_models",
    "parse_folds",
    "run_experiment",
    "summarize",
    "format_table",
]

logger = logging.getLogger(__name__)

REPORTED = ("ndcg_y@10", "ndcg_r@10")
_ARCHITECTURE = {f.name for f in dataclasses.fields(ModelConfig)}
_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One row of the table.

    Attributes:
      label: as given on the command line (the row's name).
      model: a neural model (``models.MODELS``) or a GBDT (``gbdt.GBDT_MODELS``).
      settings: overrides: training settings or LightGBM parameters.
      tuned: a ``tfr-tune`` ``best_config.json``'s settings, used as they are
        (the experiment sets data, run directory and seed).
    """

    label: str
    model: str
    settings: tuple = ()
    tuned: dict | None = None

    @property
    def slug(self) -> str:
        """The label as a directory name."""
        return re.sub(r"[^A-Za-z0-9.=_-]+", "_", self.label.replace(":", "_"))

    @property
    def is_gbdt(self) -> bool:
        return self.model in gbdt.GBDT_MODELS


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_models(text: str) -> list[ModelSpec]:
    """``"gbdt-1k,rankformer:alpha=4"`` -> model specs.

    Raises:
      ValueError: naming an unknown model, a malformed or unknown setting, or a repeat.
    """
    specs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, *pairs = item.split(":")
        if name not in MODELS and name not in gbdt.GBDT_MODELS:
            known = sorted(MODELS) + sorted(gbdt.GBDT_MODELS)
            raise ValueError(f"Unknown model {name!r} in --models; choose from {known}")
        settings = []
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ValueError(f"{item!r}: settings take KEY=VALUE, got {pair!r}")
            if name in MODELS and key not in _TRAIN_FIELDS | _ARCHITECTURE:
                raise ValueError(f"{item!r}: {key!r} is not a tfr-train setting")
            settings.append((key, _value(value)))
        specs.append(ModelSpec(item, name, tuple(settings)))
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels) or not specs:
        raise ValueError(f"--models must name distinct models, got {text!r}")
    return specs


def tuned_specs(directory: str) -> list[ModelSpec]:
    """Model specs of the ``tfr-tune`` outputs in ``directory`` (``tuning.load_tuned``)."""
    from tfr_rankformer.tuning import load_tuned

    return [
        ModelSpec(label, settings["model"], tuned=settings)
        for label, settings in load_tuned(directory)
    ]


def parse_folds(text: str) -> list[int]:
    """``"1-5"``, ``"1,3"`` or ``"2"`` -> fold numbers.

    Raises:
      ValueError: for anything else.
    """
    folds: list[int] = []
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"--folds takes e.g. 1-5 or 1,3, got {text!r}")
        folds += range(int(low), int(high) + 1) if sep else [int(low)]
    if not folds or min(folds) < 1:
        raise ValueError(f"--folds takes fold numbers from 1, got {text!r}")
    return sorted(set(folds))


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """Settings of one experiment.

    Attributes:
      dataset: a LETOR directory or dataset name (converted here), ``synthetic``,
        or a ``tfr-convert`` output (used as it is).
      output: the experiment's directory.
      models: model specs, as ``parse_models`` takes them.
      folds: fold numbers, as ``parse_folds`` takes them (a dataset without
        folds has fold 1 only).
      seeds: runs per model and fold, with seeds 0 .. seeds - 1.
      epochs: neural models' epochs; ``None``: each model's default (200; 100
        for ``context_aware``).
      batch_size: neural models' lists per batch; ``None``: each model's
        default (2048; 64 for ``context_aware``).
      patience: epochs without a better validation NDCG_y@10 before stopping;
        ``None``: ``tfr-train``'s default.
      simulate_clicks: convert with the paper's click simulation (off: the
        original labels, the paper's Appendix A).
      data_dir: where dataset names are looked up.
      synthetic_lists: train lists of a ``synthetic`` dataset (vali and test a third).
      tuned: a ``tfr-tune`` output (or a directory of them) whose best
        configurations join the table as ``tuned <model>`` rows (see ``tuned_specs``).
    """

    dataset: str
    output: str
    models: str = DEFAULT_EXPERIMENT_MODELS
    folds: str = "1-5"
    seeds: int = 1
    epochs: int | None = None
    batch_size: int | None = None
    patience: int | None = None
    simulate_clicks: bool = True
    data_dir: str | None = None
    synthetic_lists: int = 300
    tuned: str | None = None

    def __post_init__(self):
        parse_models(self.models)
        parse_folds(self.folds)
        if self.seeds < 1:
            raise ValueError(f"`seeds` must be >= 1, got {self.seeds}")


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
    architecture = {k: v for k, v in settings.items() if k in _ARCHITECTURE}
    values.update({k: v for k, v in settings.items() if k not in _ARCHITECTURE})
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
    from tfr_rankformer import experiment_plots

    results["plots"] = experiment_plots.draw_all(config.output, results, folds, specs)
    write_json(os.path.join(config.output, "results.json"), results)
    return results


def _mean_se(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values))


def summarize(runs: list[dict], labels: list[str], split: str = "test") -> dict:
    """Per model and metric: mean and standard error over its runs (folds x seeds)."""
    summary = {}
    for label in labels:
        mine = [r["metrics"][split] for r in runs if r["model"] == label]
        summary[label] = {"runs": len(mine)}
        for key in REPORTED:
            mean, se = _mean_se([m.get(key) for m in mine])
            summary[label][key] = {"mean": mean, "se": se}
    return summary


def format_table(results: dict) -> str:
    """``results.md``: the paper's Table 2 layout for one dataset."""
    summary = results["summary"]
    best = {}
    for key in REPORTED:
        means = sorted(
            {v[key]["mean"] for v in summary.values() if not math.isnan(v[key]["mean"])},
            reverse=True,
        )
        best[key] = set(means[:2])
    kind = (
        "simulated clicks"
        if results.get("label_kind") == "simulated_implicit"
        else "original labels"
    )
    name = os.path.basename(os.path.normpath(results["dataset"])) or results["dataset"]
    runs = len(results["folds"]) * results["seeds"]
    lines = [
        f"# {name} ({kind})",
        "",
        f"Test NDCG x 100, mean ± standard error over {runs} run(s) "
        f"({len(results['folds'])} fold(s) x {results['seeds']} seed(s)); the best two per "
        "column in bold. NDCG leaves out lists whose labels are all equal (RankFormer paper).",
        "",
        f"| model | {name} NDCG_y@10 | {name} NDCG_r@10 |",
        "|---|---|---|",
    ]
    for label, values in summary.items():
        cells = []
        for key in REPORTED:
            mean, se = values[key]["mean"], values[key]["se"]
            text = "-" if math.isnan(mean) else f"{mean:.2f}"
            if not math.isnan(se):
                text += f" ± {se:.2f}"
            cells.append(f"**{text}**" if mean in best[key] else text)
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"
