"""TensorFlow's start-up messages, hidden unless a command is run with ``--verbose``.

Importing TensorFlow prints lines about CUDA factories, drivers, oneDNN and CPU
instructions that a newcomer reads as failures. TensorFlow's C++ side reads its level
(``TF_CPP_MIN_LOG_LEVEL``) once, when it loads, so each command parses its arguments
(no TensorFlow), calls :func:`start_command`, and only then imports TensorFlow.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os

from tfr_rankformer.core.config_io import add_options, setting

__all__ = [
    "Display",
    "add_verbose_flag",
    "configure_command_logging",
    "set_tensorflow_log_level",
    "start_command",
]

# Hides TensorFlow's C++ INFO, WARNING and ERROR lines; a failure still raises a Python
# exception, with its message.
QUIET_LEVEL = "3"
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


@dataclasses.dataclass(frozen=True)
class Display:
    """What a command shows while it runs."""

    no_progress: bool = setting(False, "hide the progress bar")
    log_level: str = setting("INFO", "logging level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    verbose: bool = setting(
        False,
        "show TensorFlow's own log lines (CUDA plugin registration, oneDNN and CPU notices, "
        "its Python warnings), which are hidden by default; an explicit TF_CPP_MIN_LOG_LEVEL "
        "in the environment is always respected",
    )


def add_verbose_flag(parser) -> None:
    """Adds ``--verbose``, which keeps TensorFlow's own log lines."""
    add_options(parser, Display, only=("verbose",))


def set_tensorflow_log_level(*, verbose: bool) -> None:
    """Quietens TensorFlow unless ``verbose``; call it before TensorFlow is imported. A
    ``TF_CPP_MIN_LOG_LEVEL`` the user set is kept; the Python ``tensorflow`` and ``absl``
    loggers are held at ERROR (deprecation and retracing warnings)."""
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", QUIET_LEVEL)
    for name in ("tensorflow", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)


def start_command(
    args: argparse.Namespace, *, log_level: str | None = None, configure_logging: bool = True
) -> None:
    """What every command does once its arguments are parsed, before TensorFlow loads:
    TensorFlow quietened unless ``args.verbose``; logging configured at ``log_level``, else
    ``args.log_level`` where the command has ``--log-level`` (INFO when not given)."""
    set_tensorflow_log_level(verbose=bool(args.verbose))
    level = log_level
    if level is None and hasattr(args, "log_level"):
        level = args.log_level or "INFO"
    if configure_logging and level:
        configure_command_logging(level)


def configure_command_logging(level: str) -> None:
    """The root logger at ``level``, writing ``LEVEL module: message`` lines to stderr."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
