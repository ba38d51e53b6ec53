"""``tfr-tune``'s library function: Optuna search over a model's settings, resumable.

Every trial trains one ``tfr-train`` run into ``output/trials/<number>/`` and scores it by
the validation NDCG_y@10 that ``tfr-train`` selects checkpoints on. The sampler is a seeded
TPE; the study lives in ``output/study.db``, so the same command resumes it. A median pruner
stops trials below the median of earlier ones (per epoch, or every ``eval_every`` trees).
``output/`` receives ``best_config.json`` (which ``tfr-train --config`` takes),
``trials.csv``, ``search_space.json`` and the plots of ``tuning_plots``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time

from tfr_rankformer.core import model_families
from tfr_rankformer.core.config_io import require_positive_ints, write_json
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.inputs.manifest import Manifest, load_manifest
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.runner import train
from tfr_rankformer.training.train_config import TrainConfig
from tfr_rankformer.tuning import search_space

__all__ = ["TuneConfig", "run_tuning", "load_tuned", "BEST_CONFIG", "OBJECTIVE"]

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
    """Settings of one search.

    Attributes:
      model: a feature-vector model or a GBDT (``model_families``).
      data: a converted dataset with a ``vali`` split.
      output: the search's directory (its study resumes from there).
      trials: trials the study should hold when done (complete or pruned).
      timeout: stop starting trials after this many seconds (``None``: no limit).
      jobs: trials run at once (threads); GBDTs only.
      seed: seed of the sampler and of every trial's run.
      search_space: a JSON file of ranges over the defaults (``search_space``).
      settings: fixed settings of every trial: ``tfr-train`` settings for neural
        models (e.g. ``epochs``), ``GBDTConfig`` fields or LightGBM parameters
        for GBDTs.
      prune: stop unpromising trials early (median pruning).
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
        if not _tunable(self.model):
            known = list(_tunable_names())
            raise ValueError(f"Unknown model {self.model!r}; choose from {known}")
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


def _tunable(model) -> bool:
    return isinstance(model, str) and model in _tunable_names()


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


def _gbdt_values(config: TuneConfig, params: dict, model_dir: str) -> dict:
    """A trial's ``GBDTConfig`` JSON: fixed settings, then the sampled parameters."""
    fields = {f.name for f in dataclasses.fields(GBDTConfig)}
    own = {k: v for k, v in config.settings.items() if k in fields and k != "params"}
    lightgbm = dict(config.settings.get("params", {}))
    lightgbm.update({k: v for k, v in config.settings.items() if k not in fields})
    lightgbm.update(params)
    return {
        **own,
        "model": config.model,
        "data": config.data,
        "model_dir": model_dir,
        "seed": config.seed,
        "params": lightgbm,
    }


def _neural_values(config: TuneConfig, params: dict, model_dir: str) -> dict:
    """A trial's flat settings (``TrainConfig.from_flat``): fixed, then sampled."""
    return {
        **config.settings,
        **params,
        "model": config.model,
        "data": config.data,
        "model_dir": model_dir,
        "seed": config.seed,
    }


class _GBDTPruning:
    """A LightGBM callback reporting validation NDCG_y@10 to the trial, pruning on it."""

    def __init__(self, trial):
        self.trial = trial

    def __call__(self, env):
        import math

        import optuna

        if not env.evaluation_result_list:
            return
        value = env.evaluation_result_list[0][2]
        if math.isnan(value):
            return
        self.trial.report(value, env.iteration + 1)
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"pruned at tree {env.iteration + 1}: {value:.2f}")


def _keras_pruning(trial):
    """A Keras callback reporting ``val_ndcg_y@10`` per epoch to ``trial``, pruning on it."""
    import optuna
    import tensorflow as tf

    class Pruning(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            value = (logs or {}).get("val_ndcg_y@10")
            if value is None:
                return
            trial.report(float(value), epoch + 1)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned at epoch {epoch + 1}: {value:.2f}")

    return Pruning()


def _run_trial(config: TuneConfig, space: dict, trial) -> float:
    params = search_space.suggest(trial, space)
    model_dir = os.path.join(config.output, "trials", f"{trial.number:04d}")
    trial.set_user_attr("run_dir", model_dir)
    pruning = config.prune
    if config.is_gbdt:
        run = GBDTConfig.from_json(_gbdt_values(config, params, model_dir))
        metrics = train(run, callbacks=[_GBDTPruning(trial)] if pruning else None)
    else:
        run = TrainConfig.from_flat(_neural_values(config, params, model_dir))
        metrics = train(run, verbose=0, callbacks=[_keras_pruning(trial)] if pruning else None)
    return float(metrics["vali"].get("ndcg_y@10", "nan"))


def _open_study(config: TuneConfig, space: dict):
    """The study in ``output/study.db``: created, or resumed when it searched the same model
    and space; trials a killed process left running are marked failed."""
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


def _finished(study) -> int:
    import optuna

    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return len(study.get_trials(deepcopy=False, states=states))


def _best_value(study) -> float | None:
    try:
        return study.best_value
    except ValueError:  # no complete trial yet
        return None


def _write_outputs(config: TuneConfig, study, space: dict) -> dict:
    """``best_config.json``, ``trials.csv``, ``search_space.json`` and the plots."""
    from tfr_rankformer.tuning import tuning_plots

    write_json(os.path.join(config.output, "search_space.json"), search_space.space_to_json(space))
    rows = tuning_plots.write_trials_csv(study, os.path.join(config.output, "trials.csv"))
    summary = {"trials": rows, "best_value": _best_value(study), "objective": OBJECTIVE}
    if summary["best_value"] is None:
        logger.warning("no trial completed: no %s written", BEST_CONFIG)
        summary["plots"] = []
        return summary
    best = study.best_trial
    with open(os.path.join(best.user_attrs["run_dir"], "config.json"), encoding="utf-8") as f:
        settings = json.load(f)
    settings.pop("model_dir")  # tfr-train --config takes the directory as --model-dir
    write_json(os.path.join(config.output, BEST_CONFIG), settings)
    summary.update(best_trial=best.number, best_params=best.params, best_config=settings)
    summary["plots"] = tuning_plots.draw_all(study, config.output, objective=OBJECTIVE)
    return summary


def run_tuning(config: TuneConfig, *, progress: bool = True) -> dict:
    """Runs (or resumes) the search; returns a summary of the study (trial counts, the best
    value, trial, parameters and configuration, the plots, this call's seconds).

    Raises:
      ValueError: for a bad search-space file, data without a ``vali`` split, or an ``output``
        holding another study (before anything is written).
    """
    import optuna

    space = resolve_space(config)
    os.makedirs(config.output, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = _open_study(config, space)
    done = _finished(study)
    # A resumed search must not draw the first run's random start again.
    study.sampler = optuna.samplers.TPESampler(seed=config.seed + len(study.trials))
    if config.prune:
        warmup = PRUNER_WARMUP["gbdt" if config.is_gbdt else "neural"]
        study.pruner = optuna.pruners.MedianPruner(
            n_startup_trials=PRUNER_STARTUP_TRIALS, n_warmup_steps=warmup
        )
    else:
        study.pruner = optuna.pruners.NopPruner()
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
    """The best configurations of ``tfr-tune`` outputs, for ``tfr-experiment --tuned``:
    ``directory/best_config.json`` gives the row ``tuned <model>``, else each
    ``directory/<name>/best_config.json`` gives ``tuned <name>``, without ``data``,
    ``model_dir`` and ``seed``, which the experiment sets.

    Raises:
      ValueError: if there is none, or one names no model ``tfr-train`` knows.
    """
    found = []
    if os.path.isfile(os.path.join(directory, BEST_CONFIG)):
        found.append((None, os.path.join(directory, BEST_CONFIG)))
    elif os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            if os.path.isfile(os.path.join(directory, name, BEST_CONFIG)):
                found.append((name, os.path.join(directory, name, BEST_CONFIG)))
    if not found:
        raise ValueError(f"{directory}: no {BEST_CONFIG} there or one level below")
    tuned = []
    for name, path in found:
        with open(path, encoding="utf-8") as f:
            settings = json.load(f)
        model = settings.get("model") if isinstance(settings, dict) else None
        if not _tunable(model):
            raise ValueError(f"{path}: `model` {model!r} is not a model tfr-train knows")
        settings = {k: v for k, v in settings.items() if k not in ("data", "model_dir", "seed")}
        tuned.append((f"tuned {name or model}", settings))
    return tuned
