"""The programs users run: thin command lines over the library, and benchmarks.

Each command sets TensorFlow's log level in its ``main`` before TensorFlow is
imported (see ``tf_log_level``), so that ``--verbose`` can keep it.
"""

__all__ = ["COMMANDS"]

# The commands of setup.py's console scripts, as ``tfr-<name>`` with their
# module ``pipelines.<name>_cli``.
COMMANDS = (
    "convert",
    "train",
    "eval",
    "export",
    "predict",
    "distill",
    "experiment",
    "tune",
    "bm25",
)
