"""TensorFlow's start-up messages, hidden unless a command is run with ``--verbose``.

Importing TensorFlow 2.15 prints, before anything else, three ``E`` lines
about registering the cuDNN, cuFFT and cuBLAS factories, notices about CUDA
drivers, oneDNN and CPU instructions, and a TensorRT warning. None of them is
an error, and a newcomer reads them as failures. TensorFlow's C++ side reads
its log level (``TF_CPP_MIN_LOG_LEVEL``) once, when it loads, so
:func:`set_tensorflow_log_level` must run before TensorFlow is first imported:
each command parses its arguments (which imports no TensorFlow), calls it, and
only then imports the library code that needs TensorFlow.

Some native lines ignore that level: the banner ``WARNING: All log messages
before absl::InitializeLog() is called are written to STDERR``, XLA's
``I0000 ... Compiled cluster using XLA!`` and grappler's cost-model
``Error in PredictCost()`` lines, written by Abseil's logging. Without
``--verbose`` a command's standard error goes through :class:`NativeLogFilter`,
which drops those lines and passes everything else on as it comes (partial
lines, such as progress bars, included).
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import re
import sys
import threading

__all__ = [
    "LOG_FORMAT",
    "QUIET_LEVEL",
    "NativeLogFilter",
    "add_verbose_flag",
    "set_tensorflow_log_level",
    "start_command",
]

# Hides TensorFlow's C++ INFO, WARNING and ERROR lines; a failure still raises
# a Python exception, with its message.
QUIET_LEVEL = "3"
# The commands' log lines: ``INFO tfr_rankformer.training.loop: ...``.
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


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
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] == QUIET_LEVEL:
        NativeLogFilter.install()


def start_command(
    args: argparse.Namespace, *, log_level: str | None = None, configure_logging: bool = True
) -> None:
    """What every command does once its arguments are parsed, before TensorFlow loads.

    TensorFlow is quietened unless ``args.verbose``; logging is configured at
    ``log_level``, else at ``args.log_level`` when the command has ``--log-level``
    (a command with neither leaves logging alone, as does ``configure_logging=False``
    for one that configures it after an import of its own).
    """
    set_tensorflow_log_level(verbose=args.verbose)
    level = log_level or getattr(args, "log_level", None)
    if configure_logging and level:
        configure_command_logging(level)


def configure_command_logging(level: str) -> None:
    """The root logger at ``level``, writing :data:`LOG_FORMAT` lines to standard error."""
    logging.basicConfig(level=level, format=LOG_FORMAT)


_BANNER = b"WARNING: All log messages before absl::InitializeLog() is called"
# Abseil's prefix: severity, MMDD, time, thread, file:line].
_ABSL_LINE = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]]+\] ")
_UNDECIDED = 64  # bytes of a line's start held back until it is known not to be noise


def is_native_noise(line: bytes) -> bool:
    """Whether a whole line of standard error is one of the native lines hidden.

    >>> is_native_noise(b"I0000 00:00:1795.5   25 device_compiler.h:186] Compiled cluster")
    True
    >>> is_native_noise(b"E0000 00:00:1795.5   25 op_level_cost_estimator.cc:699] Error in "
    ...                 b"PredictCost() for the op")
    True
    >>> is_native_noise(b"E0000 00:00:1795.5   25 session.cc:1] something failed")
    False
    """
    if line.startswith(_BANNER):
        return True
    match = _ABSL_LINE.match(line)
    if match is None:
        return False
    return match.group(1) == b"I" or b"PredictCost()" in line


class NativeLogFilter:
    """Standard error (file descriptor 2) through a pipe that drops native noise lines.

    A thread copies what arrives to the original standard error at once,
    holding back only the start of a line that may still turn out to be a
    noise line (up to its end, or its first 64 bytes). At exit the original
    descriptor is restored and the rest is copied out.
    """

    _installed = False

    def __init__(self, output: int):
        self.output = output
        self.pending = b""
        self.passing = False  # the current line's start was copied: copy its rest

    @classmethod
    def install(cls) -> None:
        """Installs the filter once, where standard error is the process's own."""
        if cls._installed or sys.stderr is not sys.__stderr__:
            return
        try:
            if sys.stderr.fileno() != 2:
                return
        except (AttributeError, OSError, ValueError):
            return
        cls._installed = True
        sys.stderr.flush()
        original = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        pump = cls(original)
        thread = threading.Thread(target=pump.run, args=(read_end,), daemon=True)
        thread.start()

        def restore() -> None:
            sys.stderr.flush()
            os.dup2(original, 2)  # the pipe's last writer in this process
            thread.join(timeout=2.0)  # forked children may still hold the pipe

        atexit.register(restore)

    def run(self, read_end: int) -> None:
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            self.feed(chunk)
        if self.pending and not is_native_noise(self.pending):
            self._write(self.pending)

    def feed(self, chunk: bytes) -> None:
        """Copies what ``chunk`` completes, keeping back an undecided line start."""
        *lines, rest = (self.pending + chunk).split(b"\n")
        for line in lines:
            if self.passing or not is_native_noise(line):
                self._write(line + b"\n")
            self.passing = False
        self.pending = rest
        if self.passing or (rest and self._decided(rest)):
            self._write(rest)
            self.pending, self.passing = b"", True

    @staticmethod
    def _decided(start: bytes) -> bool:
        """Whether a line that starts with ``start`` cannot be a noise line."""
        if _BANNER.startswith(start[: len(_BANNER)]):  # the banner, or its start
            return False
        if _ABSL_LINE.match(start):
            return False  # a native line: decided at its end
        return len(start) >= _UNDECIDED or start[:1] not in b"IWEF" or b"\r" in start

    def _write(self, data: bytes) -> None:
        while data:
            written = os.write(self.output, data)
            data = data[written:]
