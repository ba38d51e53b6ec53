"""Benchmarks run as modules (``python -m pipelines.benchmarks.NAME``).

They import TensorFlow at module level, so TensorFlow's start-up notices are
hidden here, before that import (set ``TF_CPP_MIN_LOG_LEVEL`` to see them).
"""

from pipelines.tf_log_level import set_tensorflow_log_level

set_tensorflow_log_level(verbose=False)

__all__: list[str] = []
