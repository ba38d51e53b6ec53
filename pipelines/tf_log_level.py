"""What every command shares: TensorFlow's start-up lines hidden and errors given as one
line, unless the command is run with ``--verbose``.

TensorFlow reads ``TF_CPP_MIN_LOG_LEVEL`` once, when it loads, so each command parses its
arguments, calls :func:`start_command`, and only then imports TensorFlow. The Abseil copy
inside ``libtensorflow_cc`` ignores that level and exports no control (XLA's "Compiled
cluster" notice, grappler's "Error in PredictCost()", Abseil's banner):
:class:`NativeLogFilter` drops those lines alone.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import functools
import logging
import os
import re
import sys
import threading
import traceback

from tfr_rankformer.core.config_io import add_options, setting

# TensorFlow's C++ INFO, WARNING and ERROR lines hidden; a failure still raises in Python.
QUIET_LEVEL = "3"
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


@dataclasses.dataclass(frozen=True)
class Display:
    """What a command shows while it runs."""

    no_progress: bool = setting(False, "hide the progress bar")
    progress_seconds: float = setting(
        30.0,
        "where standard output or error is not a terminal, a progress line (step, lists/s, "
        "the epoch's ETA) is logged this often, and one at each epoch's end; a terminal "
        "shows Keras's progress bar",
    )
    log_level: str = setting("INFO", "logging level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    verbose: bool = setting(
        False,
        "show TensorFlow's own log lines (CUDA plugin registration, oneDNN and CPU notices, "
        "its Python warnings), which are hidden by default, and an error's Python traceback; "
        "an explicit TF_CPP_MIN_LOG_LEVEL in the environment is always respected",
    )


def add_verbose_flag(parser) -> None:
    add_options(parser, Display, only=("verbose",))


def set_tensorflow_log_level(*, verbose: bool) -> None:
    """Quietens TensorFlow (C++ lines, Python deprecation and retracing warnings) unless
    ``verbose``, before it is imported; a ``TF_CPP_MIN_LOG_LEVEL`` the user set is kept."""
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", QUIET_LEVEL)
    for name in ("tensorflow", "absl"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if os.environ["TF_CPP_MIN_LOG_LEVEL"] == QUIET_LEVEL:
        NativeLogFilter.install()


def start_command(args: argparse.Namespace, *, log_level: str | None = None) -> None:
    """Every command's start, before TensorFlow loads: TensorFlow quietened unless
    ``--verbose``; logging at ``log_level``, else at ``--log-level`` (INFO) if it has one."""
    set_tensorflow_log_level(verbose=bool(args.verbose))
    if log_level is None and hasattr(args, "log_level"):
        log_level = args.log_level or "INFO"
    if log_level:
        logging.basicConfig(level=log_level, format=LOG_FORMAT)


def one_error_line(prog: str):
    """Decorates command ``prog``'s ``main(argv)``: an exception becomes one line
    (:func:`error_line`; the traceback too with ``--verbose``) and exit status 1; Ctrl-C 130."""

    def decorate(main):
        @functools.wraps(main)
        def run(argv: list[str] | None = None) -> int:
            words = sys.argv[1:] if argv is None else list(argv)
            try:
                return main(argv)
            except KeyboardInterrupt:
                print(f"{prog}: interrupted", file=sys.stderr)
                return 130
            except Exception as error:
                if "--verbose" in words:
                    traceback.print_exc()
                print(f"{prog}: error: {error_line(error, words)}", file=sys.stderr)
                return 1

        return run

    return decorate


def error_line(error: Exception, argv: list[str]) -> str:
    """The user's line for ``error``: a `field` given as an option named as written
    (``--top-k``); an I/O failure also names the option of ``argv`` whose path it concerns.

    >>> error_line(OSError(28, "No space left on device", "run/x.index"), ["--model-dir", "run"])
    '--model-dir run: No space left on device: run/x.index'
    >>> error_line(KeyError("k"), [])
    "unexpected KeyError: 'k' (run again with --verbose to see where)"
    """
    tf_errors = getattr(sys.modules.get("tensorflow"), "errors", None)
    path = None
    if isinstance(error, OSError) and error.errno and error.filename:
        path, text = str(error.filename), error.strerror or str(error)
    elif tf_errors is not None and isinstance(error, tf_errors.OpError):
        # "{{function_node ...}} PATH; REASON [Op:SaveV2]" -> PATH, REASON
        text = re.sub(r"\{\{.*?\}\}|\[Op:\w+\]", "", error.message).strip()
        text = (text.splitlines() or [type(error).__name__])[0]
        where, _, reason = text.rpartition("; ")
        head, _, named = where.rpartition(" ")
        if "/" in named and reason:
            path, text = named, f"{head.rstrip(': ')}: {reason}" if head else reason
    elif isinstance(error, OSError):
        text = str(error)
    elif isinstance(error, ValueError):
        return written_as_given(str(error), argv)
    else:
        return f"unexpected {type(error).__name__}: {error} (run again with --verbose to see where)"
    path = path and re.sub(r"\.partial(?=/|$)", "", path)  # atomic_path's temporary name
    option = _option_of(path or text, argv)
    if option is None:
        return f"{path}: {text}" if path else text
    flag, value = option
    if path is not None and os.path.abspath(path) != os.path.abspath(value):
        return f"{flag} {value}: {text}: {path}"
    if path is None and re.match(re.escape(value) + r"[\s:]", text):
        return f"{flag} {text}"  # a message about the option's own path
    if path is None and isinstance(error, OSError):
        return text  # its own message names the path
    return f"{flag} {value}: {text}"


def written_as_given(text: str, argv: list[str]) -> str:
    """``text`` with each `field` the user gave as an option written as that option.

    >>> written_as_given("`top_k` must be a positive int, got 0", ["--top-k", "0"])
    '--top-k must be a positive int, got 0'
    """

    def named(match: re.Match) -> str:
        flag = "--" + match.group(1).replace("_", "-")
        return flag if any(w == flag or w.startswith(flag + "=") for w in argv) else match[0]

    return re.sub(r"`([a-z][a-z_0-9]*)`", named, text)


def _option_of(text: str, argv: list[str]) -> tuple[str, str] | None:
    """The ``(--flag, value)`` of ``argv`` whose value is the longest path in ``text``."""
    pairs = [w.split("=", 1) for w in argv if w.startswith("--") and "=" in w]
    pairs += [(f, v) for f, v in zip(argv, argv[1:]) if f.startswith("--") and v[:1] != "-"]
    found = []
    for flag, value in pairs:
        where = re.escape(value.rstrip("/") or "/")
        if re.search(rf"(?:^|[\s'\"(=]){where}(?:$|[/\s:;,.'\")])", text):
            found.append((len(value), flag, value))
    return max(found)[1:] if found else None


_BANNER = b"WARNING: All log messages before absl::InitializeLog() is called"
# Abseil's prefix: severity, MMDD, time, thread, file:line].
_ABSL_LINE = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]]+\] ")


def is_native_noise(line: bytes) -> bool:
    """Whether a whole line of standard error is native noise.

    >>> is_native_noise(b"I0000 00:00:1795.5   25 device_compiler.h:186] Compiled cluster")
    True
    >>> is_native_noise(b"E0000 00:00:1795.5   25 session.cc:1] something failed")
    False
    """
    match = _ABSL_LINE.match(line)
    if line.startswith(_BANNER):
        return True
    return match is not None and (match.group(1) == b"I" or b"PredictCost()" in line)


class NativeLogFilter:
    """Standard error (descriptor 2) through a pipe whose thread drops native noise lines and
    copies the rest at once, holding back only a line's start that may be noise."""

    _installed = False

    def __init__(self, output: int):
        self.output, self.pending, self.passing = output, b"", False

    @classmethod
    def install(cls) -> None:
        try:
            if cls._installed or sys.stderr is not sys.__stderr__ or sys.stderr.fileno() != 2:
                return
        except (AttributeError, OSError, ValueError):
            return
        cls._installed = True
        sys.stderr.flush()
        original = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        thread = threading.Thread(target=cls(original).run, args=(read_end,), daemon=True)
        thread.start()

        def restore() -> None:
            sys.stderr.flush()
            os.dup2(original, 2)  # the pipe's last writer in this process
            thread.join(timeout=2.0)  # forked children may still hold the pipe

        atexit.register(restore)

    def run(self, read_end: int) -> None:
        while chunk := os.read(read_end, 65536):
            self.feed(chunk)
        if self.pending and not is_native_noise(self.pending):
            self._write(self.pending)

    def feed(self, chunk: bytes) -> None:
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        for line in lines:
            if self.passing or not is_native_noise(line):
                self._write(line + b"\n")
            self.passing = False
        if self.pending and (self.passing or self._decided(self.pending)):
            self._write(self.pending)
            self.pending, self.passing = b"", True

    @staticmethod
    def _decided(start: bytes) -> bool:
        if _BANNER.startswith(start[: len(_BANNER)]) or _ABSL_LINE.match(start):
            return False  # the banner or its start, or a native line: decided at its end
        return len(start) >= 64 or start[:1] not in b"IWEF" or b"\r" in start

    def _write(self, data: bytes) -> None:
        while data:
            data = data[os.write(self.output, data) :]
