"""``tfr-tune``'s ``trials.csv`` and plots (importances by PED-ANOVA: the other evaluators
need scikit-learn, which the package does not depend on)."""

from __future__ import annotations

import csv
import logging
import os

from tfr_rankformer.core.atomic_files import atomic_path, atomic_write

logger = logging.getLogger(__name__)


def write_trials_csv(study, path: str) -> dict:
    """A row per trial in ``path``; returns the count of trials per state."""
    trials = study.get_trials(deepcopy=False)
    names = sorted({name for t in trials for name in t.params})
    counts: dict[str, int] = {}
    with atomic_write(path, newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["number", "state", "value", "seconds", *names, "run_dir"])
        for t in trials:
            counts[t.state.name.lower()] = counts.get(t.state.name.lower(), 0) + 1
            seconds = t.duration.total_seconds() if t.duration is not None else ""
            row = [t.number, t.state.name.lower(), "" if t.value is None else t.value, seconds]
            row += [t.params.get(name, "") for name in names]
            writer.writerow([*row, t.user_attrs.get("run_dir", "")])
    return counts


def _save(axes, path: str) -> str:
    import matplotlib.pyplot as plt

    figure = axes.figure
    figure.set_size_inches(7, 4.5)
    figure.tight_layout()
    with atomic_path(path, suffix=".partial.png") as partial:  # the suffix names the format
        figure.savefig(partial, dpi=110)
    plt.close(figure)
    return path


def draw_all(study, output: str, *, objective: str) -> list[str]:
    """Writes the plots that the study's trials allow; returns their paths."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import optuna
    from optuna.visualization import matplotlib as optuna_plots

    written = []
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if complete:
            axes = optuna_plots.plot_optimization_history(study, target_name=objective)
            written.append(_save(axes, os.path.join(output, "optimization_history.png")))
        if len(complete) >= 2 and any(t.params for t in complete):
            evaluator = optuna.importance.PedAnovaImportanceEvaluator()
            axes = optuna_plots.plot_param_importances(
                study, evaluator=evaluator, target_name=objective
            )
            written.append(_save(axes, os.path.join(output, "param_importances.png")))
        else:
            logger.warning("parameter importances need two complete trials: not drawn")
    return written
