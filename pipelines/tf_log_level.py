"""TensorFlow's start-up messages, hidden unless a command is run with ``--verbose``.

Importing TensorFlow 2.15 prints, before anything else, three ``E`` lines
about registering the cuDNN, cuFFT and cuBLAS factories, notices about CUDA
drivers, oneDNN and CPU instructions, and a TensorRT warning. None of them is
an error, and a newcomer reads them as failures. TensorFlow's C++ side reads
its log level (``TF_CPP_MIN_LOG_LEVEL``) once, when it loads, so
:func:`set_tensorflow_log_level` must run before TensorFlow is first imported:
each command parses its arguments (which imports no TensorFlow), calls it, and
only then imports the library code that needs TensorFlow.
"""

from __future__ import annotations

import argparse
import logging
import os

__all__ = ["QUIET_LEVEL", "add_verbose_flag", "set_tensorflow_log_level"]

# Hides TensorFlow's C++ INFO, WARNING and ERROR lines; a failure still raises
# a Python exception, with its message.
QUIET_LEVEL = "3"


def add_verbose_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Adds ``--verbose``, which keeps TensorFlow's own log lines."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show TensorFlow's own log lines (CUDA plugin registration, oneDNN and CPU "
        "notices, its Python warnings), which are hidden by default; an explicit "
        "TF_CPP_MIN_LOG_LEVEL in the environment is always respected",
    )


def set_tensorflow_log_level(*, verbose: bool) -> None:
    """Quietens TensorFlow unless ``verbose``; call it before TensorFlow is imported.

    A ``TF_CPP_MIN_LOG_LEVEL`` the user set is left as it is. The Python
    ``tensorflow`` logger is held at ERROR, which hides its deprecation and
    retracing warnings.
    """
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", QUIET_LEVEL)
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
