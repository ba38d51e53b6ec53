"""The types of what runs return: ``metrics.json``'s content and its parts.

A run's metrics map each evaluated split (``"test"``, or ``"test@<data_dir>"``
for another dataset) to that split's metrics, ``"training"`` to what training
did, and ``"settings"`` to the run's resolved settings. Split names are data,
so the mapping is typed by its values; ``split_metrics`` and
``training_summary`` give the parts their precise types.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

__all__ = [
    "GbdtTrainingSummary",
    "NeuralTrainingSummary",
    "RunMetrics",
    "SplitMetrics",
    "split_metrics",
    "training_summary",
]

# One split's metrics (``ranking_metrics.evaluate_rankings``): ``ndcg_y@10``
# and the other means are floats, ``num_lists`` and the counts ints,
# ``convention`` a string, and a text run's ``truncation`` a dict.
SplitMetrics = dict[str, Any]
# ``metrics.json``: split -> SplitMetrics, plus ``training`` and ``settings``.
RunMetrics = dict[str, Any]

_NOT_SPLITS = ("training", "settings")


class NeuralTrainingSummary(TypedDict, total=False):
    """``metrics["training"]`` of a neural run (``training.loop``)."""

    epochs_completed: int
    epochs_this_run: int
    seconds: float
    lists_per_epoch: int
    steps_per_epoch: int
    items_per_epoch: int
    padded_items_per_epoch: int
    items_left_out_per_epoch: int
    buckets: dict[str, dict[str, int]]
    estimated_peak_bytes: int
    lists_per_sec: float | None
    monitor: str
    strategy: str
    workers: int
    precision: str
    mixed_precision: bool
    xla: bool


class GbdtTrainingSummary(TypedDict, total=False):
    """``metrics["training"]`` of a LightGBM run (``gbdt.lightgbm_ranker``)."""

    trees: int
    trees_grown: int
    trees_budget: int
    early_stopping_rounds: int
    seconds: float
    lists: int
    items: int
    lightgbm_params: dict[str, Any]
    lightgbm_version: str


def split_metrics(metrics: RunMetrics) -> dict[str, SplitMetrics]:
    """The per-split entries of a run's metrics, without ``training`` and ``settings``.

    >>> split_metrics({"test": {"ndcg_y@10": 50.0}, "training": {}, "settings": {}})
    {'test': {'ndcg_y@10': 50.0}}
    """
    return {split: values for split, values in metrics.items() if split not in _NOT_SPLITS}


def training_summary(metrics: RunMetrics) -> NeuralTrainingSummary | GbdtTrainingSummary:
    """``metrics["training"]``, typed: a GBDT's summary counts trees, a neural run's epochs.

    Raises:
      KeyError: the metrics hold no training summary (e.g. ``tfr-eval``'s results).
    """
    summary = metrics["training"]
    if "trees" in summary:
        return cast(GbdtTrainingSummary, summary)
    return cast(NeuralTrainingSummary, summary)
