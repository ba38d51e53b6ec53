"""The types of what runs return: ``metrics.json``'s content and its parts.

A run's metrics map each evaluated split (``"test"``, or ``"test@<data_dir>"``
for another dataset) to that split's metrics, ``"training"`` to what training
did (``training.loop``'s or ``gbdt.lightgbm_ranker``'s summary), and
``"settings"`` to the run's resolved settings. Split names are data, so the
mapping is typed by its values.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RunMetrics", "SplitMetrics"]

# One split's metrics (``ranking_metrics.evaluate_rankings``): ``ndcg_y@10``
# and the other means are floats, ``num_lists`` and the counts ints,
# ``convention`` a string, and a text run's ``truncation`` a dict.
SplitMetrics = dict[str, Any]
# ``metrics.json``: split -> SplitMetrics, plus ``training`` and ``settings``.
RunMetrics = dict[str, Any]
