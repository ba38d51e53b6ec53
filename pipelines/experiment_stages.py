"""``tfr-experiment``'s stage lines: one when a stage starts, one when it ends, with times.

An experiment converts a dataset, then trains and evaluates many runs for
minutes each; without a terminal (``make demo`` in a log, a batch job) no
progress bar shows, and a silent command looks hung. So each stage logs a line
at INFO to this module's logger when it starts and when it ends, stamped with
the time since the experiment started, the end line with the stage's own time::

    [0:00:00] convert synthetic into demo/synthetic/data: started
    [0:00:12] convert synthetic into demo/synthetic/data: done in 12 s
    [0:00:12] run 1/4 gbdt Fold1 seed0: started
    [0:01:14] run 1/4 gbdt Fold1 seed0: done in 1 min 02 s

Between the two lines of a run, training logs its own progress lines (see
``tfr_rankformer.training.training_callbacks.ProgressLines``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

__all__ = ["StageLog", "format_duration"]

logger = logging.getLogger(__name__)


def format_duration(seconds: float) -> str:
    """Seconds as a person reads them.

    >>> format_duration(4.2), format_duration(62), format_duration(3725)
    ('4 s', '1 min 02 s', '1 h 02 min 05 s')
    """
    whole = max(int(round(seconds)), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min {secs:02d} s"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def _stamp(seconds: float) -> str:
    """``[H:MM:SS]`` since the experiment started."""
    whole = max(int(seconds), 0)
    return f"[{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}]"


class StageLog:
    """Logs the start and the end of an experiment's stages.

    Args:
      clock: Seconds from a monotonic clock; tests give their own. The
        experiment's time counts from the ``StageLog``'s creation.

    >>> stages = StageLog(clock=iter([0.0, 5.0, 65.0]).__next__)
    >>> with stages.stage("convert"):  # logs "[0:00:05] convert: started"
    ...     pass                       # and "[0:01:05] convert: done in 1 min 00 s"
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()

    def note(self, message: str, *args) -> None:
        """Logs one line stamped with the experiment's time, e.g. a run that is skipped."""
        logger.info("%s " + message, _stamp(self.clock() - self.started), *args)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Logs ``name: started`` on entry and ``name: done in ...`` on exit; a stage that
        raises logs how long it ran before it failed, and the exception goes on."""
        started = self.clock()
        logger.info("%s %s: started", _stamp(started - self.started), name)
        try:
            yield
        except BaseException as e:
            now = self.clock()
            logger.info(
                "%s %s: stopped by %s after %s",
                _stamp(now - self.started),
                name,
                type(e).__name__,
                format_duration(now - started),
            )
            raise
        now = self.clock()
        logger.info(
            "%s %s: done in %s",
            _stamp(now - self.started),
            name,
            format_duration(now - started),
        )
