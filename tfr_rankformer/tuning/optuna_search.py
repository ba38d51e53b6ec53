"""``tfr-tune``'s library function: a resumable Optuna search (seeded TPE, median pruning,
the study in ``output/study.db``) whose trials are ``tfr-train`` runs in
``output/trials/<number>/``, scored by their validation NDCG_y@10.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import math
import os
import time

from tfr_rankformer.core import model_families
from tfr_rankformer.core.config_io import read_settings, require_positive_ints, write_json
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.inputs.manifest import Manifest, load_manifest
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.runner import train
from tfr_rankformer.training.train_config import TrainConfig
from tfr_rankformer.tuning import search_space

logger = logging.getLogger(__name__)

BEST_CONFIG = "best_config.json"
STUDY_DB = "study.db"
STUDY_NAME = "tfr-tune"
OBJECTIVE = "vali ndcg_y@10"
# Trials before the pruner may prune, and steps (epochs, trees) it waits in each.
PRUNER_STARTUP_TRIALS = 5
PRUNER_WARMUP = {"gbdt": 100, "neural": 3}


@dataclasses.dataclass(frozen=True)
class TuneConfig:
    """Settings of one search (``tfr-tune``'s options say what each is).

    Attributes:
      trials: trials the study should hold when done (complete or pruned).
      jobs: trials run at once (threads); GBDTs only.
      settings: fixed settings of every trial: ``tfr-train``'s for neural models,
        ``GBDTConfig`` fields or LightGBM parameters for GBDTs.
    """

    model: str
    data: str
    output: str
    trials: int = 30
    timeout: float | None = None
    jobs: int = 1
    seed: int = 0
    search_space: str | None = None
    settings: dict = dataclasses.field(default_factory=dict)
    prune: bool = True

    def __post_init__(self):
        if self.model not in _tunable_names():
            raise ValueError(f"Unknown model {self.model!r}; choose from {list(_tunable_names())}")
        if not self.data or not self.output:
            raise ValueError("`data` and `output` must be given")
        require_positive_ints(self, "trials", "jobs")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"`timeout` must be > 0 seconds, got {self.timeout}")
        if self.jobs > 1 and not self.is_gbdt:
            raise ValueError(
                "`jobs` > 1 is for GBDTs: TensorFlow's seeding and precision policy are "
                "process-wide, so neural trials run one at a time"
            )
        fixed = {"model", "data", "model_dir", "seed"} & set(self.settings)
        if fixed:
            raise ValueError(f"`settings` may not set {sorted(fixed)}: the search sets them")

    @property
    def is_gbdt(self) -> bool:
        return model_families.is_gbdt(self.model)


def _tunable_names() -> tuple[str, ...]:
    """The models a search takes: feature-vector ones, then GBDTs (each sorted)."""
    kinds = model_families.FEATURES_KIND, model_families.GBDT_KIND
    return tuple(name for kind in kinds for name in model_families.model_names(kind))


def _width(config: TuneConfig, manifest: Manifest) -> int:
    """The encoder's width: the model's ``item_width`` setting, else the feature count."""
    field = model_families.get_model(config.model).item_width
    if field is not None:
        architecture = config.settings.get("architecture", {})
        default = getattr(ModelConfig().resolved(config.model), field)
        return int(config.settings.get(field, architecture.get(field, default)))
    return int(manifest.num_features)


def resolve_space(config: TuneConfig) -> dict:
    """The search space of ``config``: the defaults with its JSON file's ranges."""
    manifest = load_manifest(config.data)
    if "vali" not in manifest.splits:
        raise ValueError(f"{config.data} has no vali split: the search scores on it")
    width = _width(config, manifest)
    defaults = search_space.default_space(config.model, gbdt=config.is_gbdt, width=width)
    space = search_space.load_space(config.search_space, defaults, what=config.model)
    heads = space.get("num_heads")
    if heads is not None:
        values = heads.choices or range(int(heads.low), int(heads.high) + 1)
        wrong = [h for h in values if not isinstance(h, int) or h < 1 or width % h]
        if wrong:
            raise ValueError(
                f"{config.search_space}: 'num_heads' {wrong} do not divide the encoder's "
                f"width {width}"
            )
    return space


def _trial_values(config: TuneConfig, params: dict, model_dir: str) -> dict:
    """A trial's settings: the fixed ones, then the sampled ``params``."""
    run = {"model": config.model, "data": config.data, "model_dir": model_dir, "seed": config.seed}
    if not config.is_gbdt:
        return {**config.settings, **params, **run}
    fields = {f.name for f in dataclasses.fields(GBDTConfig)}
    own = {k: v for k, v in config.settings.items() if k in fields and k != "params"}
    lightgbm = {k: v for k, v in config.settings.items() if k not in fields}
    return {**own, **run, "params": {**config.settings.get("params", {}), **lightgbm, **params}}


def _report(trial, value: float, step: int, unit: str) -> None:
    """Reports ``value`` at ``step`` to ``trial`` and prunes the trial if the pruner says so."""
    import optuna

    trial.report(value, step)
    if trial.should_prune():
        raise optuna.TrialPruned(f"pruned at {unit} {step}: {value:.2f}")


class _GBDTPruning:
    """A LightGBM callback reporting validation NDCG_y@10 to the trial."""

    def __init__(self, trial):
        self.trial = trial

    def __call__(self, env):
        value = env.evaluation_result_list[0][2] if env.evaluation_result_list else math.nan
        if not math.isnan(value):  # NaN: a tree between two evaluations
            _report(self.trial, value, env.iteration + 1, "tree")


def _keras_pruning(trial):
    """A Keras callback reporting ``val_ndcg_y@10`` per epoch to ``trial``."""
    import tensorflow as tf

    class Pruning(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            value = (logs or {}).get("val_ndcg_y@10")
            if value is not None:
                _report(trial, float(value), epoch + 1, "epoch")

    return Pruning()


def _run_trial(config: TuneConfig, space: dict, trial) -> float:
    params = search_space.suggest(trial, space)
    model_dir = os.path.join(config.output, "trials", f"{trial.number:04d}")
    trial.set_user_attr("run_dir", model_dir)
    values = _trial_values(config, params, model_dir)
    if config.is_gbdt:
        pruning = [_GBDTPruning(trial)] if config.prune else None
        metrics = train(GBDTConfig.from_json(values), callbacks=pruning)
    else:
        pruning = [_keras_pruning(trial)] if config.prune else None
        metrics = train(TrainConfig.from_flat(values), verbose=0, callbacks=pruning)
    return float(metrics["vali"].get("ndcg_y@10", "nan"))


def _open_study(config: TuneConfig, space: dict):
    """The study, created or resumed; trials a killed process left running are marked failed."""
    import optuna

    storage = f"sqlite:///{os.path.abspath(os.path.join(config.output, STUDY_DB))}"
    identity = {"model": config.model, "search_space": search_space.space_to_json(space)}
    study = optuna.create_study(
        study_name=STUDY_NAME,
        storage=storage,
        direction="maximize",
        load_if_exists=True,
    )
    recorded = study.user_attrs.get("identity")
    if recorded is None:
        study.set_user_attr("identity", identity)
        study.set_user_attr("objective", OBJECTIVE)
    elif recorded != json.loads(json.dumps(identity)):
        raise ValueError(
            f"{config.output} holds a study of {recorded['model']} over another search space; "
            "give a new --output, or the same model and search space to resume it"
        )
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        logger.warning("trial %d was interrupted: marking it failed", trial.number)
        study._storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
    return study


def _write_outputs(config: TuneConfig, study, space: dict) -> dict:
    """``best_config.json``, ``trials.csv``, ``search_space.json`` and the plots."""
    from tfr_rankformer.tuning import tuning_plots

    write_json(os.path.join(config.output, "search_space.json"), search_space.space_to_json(space))
    rows = tuning_plots.write_trials_csv(study, os.path.join(config.output, "trials.csv"))
    summary = {"trials": rows, "best_value": None, "objective": OBJECTIVE, "plots": []}
    if "complete" not in rows:
        logger.warning("no trial completed: no %s written", BEST_CONFIG)
        return summary
    best = study.best_trial
    summary["best_value"] = best.value
    settings = read_settings(os.path.join(best.user_attrs["run_dir"], "config.json"))
    settings.pop("model_dir")  # tfr-train --config takes the directory as --model-dir
    write_json(os.path.join(config.output, BEST_CONFIG), settings)
    summary.update(best_trial=best.number, best_params=best.params, best_config=settings)
    summary["plots"] = tuning_plots.draw_all(study, config.output, objective=OBJECTIVE)
    return summary


def run_tuning(config: TuneConfig, *, progress: bool = True) -> dict:
    """Runs (or resumes) the search; returns a summary of the study. ``ValueError`` for a bad
    search space, data without a ``vali`` split, or an ``output`` of another study."""
    import optuna

    space = resolve_space(config)
    os.makedirs(config.output, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = _open_study(config, space)
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    done = len(study.get_trials(deepcopy=False, states=states))
    # A resumed search must not draw the first run's random start again.
    study.sampler = optuna.samplers.TPESampler(seed=config.seed + len(study.trials))
    warmup = PRUNER_WARMUP["gbdt" if config.is_gbdt else "neural"]
    median = optuna.pruners.MedianPruner(PRUNER_STARTUP_TRIALS, n_warmup_steps=warmup)
    study.pruner = median if config.prune else optuna.pruners.NopPruner()
    started = time.perf_counter()
    remaining = config.trials - done
    if remaining > 0:
        logger.info("%d of %d trials done: running %d more", done, config.trials, remaining)
        study.optimize(
            lambda trial: _run_trial(config, space, trial),
            n_trials=remaining,
            timeout=config.timeout,
            n_jobs=config.jobs,
            gc_after_trial=True,
            show_progress_bar=progress,
        )
    summary = _write_outputs(config, study, space)
    summary["seconds"] = time.perf_counter() - started
    return summary


def load_tuned(directory: str) -> list[tuple[str, dict]]:
    """``tfr-experiment --tuned``'s rows: ``directory/best_config.json``, else each
    ``directory/<name>/best_config.json``, without ``data``, ``model_dir`` and ``seed``."""
    top = os.path.join(directory, BEST_CONFIG)
    below = sorted(glob.glob(os.path.join(glob.escape(directory), "*", BEST_CONFIG)))
    found = [top] if os.path.isfile(top) else below
    if not found:
        raise ValueError(f"{directory}: no {BEST_CONFIG} there or one level below")
    tuned = []
    for path in found:
        settings = read_settings(path)
        model = settings.get("model")
        if model not in _tunable_names():
            raise ValueError(f"{path}: `model` {model!r} is not a model tfr-train knows")
        name = model if path == top else os.path.basename(os.path.dirname(path))
        settings = {k: v for k, v in settings.items() if k not in ("data", "model_dir", "seed")}
        tuned.append((f"tuned {name}", settings))
    return tuned
