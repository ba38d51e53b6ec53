"""The names earlier versions offered here: reloading a trained feature-vector run
(``feature_runs.load_run``) and evaluating any run (``runner.evaluate``)."""

from __future__ import annotations

from tfr_rankformer.feature_runs import load_run

__all__ = ["load_run", "evaluate_run"]


def evaluate_run(
    model_dir: str, *, data_dir: str | None = None, splits: list[str] | None = None
) -> dict:
    """Evaluates a trained run of any kind: ``runner.evaluate``."""
    # Imported here: the runner is above the modules that reload runs.
    from tfr_rankformer.runner import evaluate

    return evaluate(model_dir, data_dir=data_dir, splits=splits)
