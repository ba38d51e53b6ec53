"""Benchmarks run as modules (``python -m pipelines.benchmarks.NAME``); TensorFlow's
start-up notices are hidden before they import it (``TF_CPP_MIN_LOG_LEVEL`` shows them)."""

from pipelines.tf_log_level import set_tensorflow_log_level

set_tensorflow_log_level(verbose=False)

__all__: list[str] = []
