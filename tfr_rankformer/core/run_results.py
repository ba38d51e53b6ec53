"""The types of what runs return: ``metrics.json`` maps each evaluated split (``"test"``, or
``"test@<data_dir>"``) to its metrics, ``"training"`` to what training did and
``"settings"`` to the run's resolved settings.
"""

from __future__ import annotations

from typing import Any

# One split's metrics (``ranking_metrics.evaluate_rankings``).
SplitMetrics = dict[str, Any]
# ``metrics.json``: split -> SplitMetrics, plus ``training`` and ``settings``.
RunMetrics = dict[str, Any]
