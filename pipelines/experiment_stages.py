"""``tfr-experiment``'s stage lines: one when a stage starts and one when it ends.

Without a terminal no progress bar shows and a silent command looks hung, so each
stage logs at INFO, stamped with the time since the experiment started::

    [0:00:12] run 1/4 gbdt Fold1 seed0: started
    [0:01:14] run 1/4 gbdt Fold1 seed0: done in 1 min 02 s
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import time
from collections.abc import Callable, Iterator

logger = logging.getLogger(__name__)


def format_duration(seconds: float) -> str:
    """Seconds as a person reads them.

    >>> format_duration(4.2), format_duration(62), format_duration(3725)
    ('4 s', '1 min 02 s', '1 h 02 min 05 s')
    """
    hours, rest = divmod(max(int(round(seconds)), 0), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min {secs:02d} s"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


class StageLog:
    """Logs the start and the end of an experiment's stages; ``clock`` gives monotonic
    seconds (tests give their own) and the experiment's time counts from creation."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()

    def note(self, message: str, *args, now: float | None = None) -> None:
        """Logs one stamped line, e.g. a run that is skipped."""
        whole = max(int((self.clock() if now is None else now) - self.started), 0)
        logger.info("[%s] " + message, datetime.timedelta(seconds=whole), *args)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Logs ``name: started`` and ``name: done in ...`` (or how long it ran before an
        exception, which goes on)."""
        started = self.clock()
        self.note("%s: started", name, now=started)
        end = "done in"
        try:
            yield
        except BaseException as e:
            end = f"stopped by {type(e).__name__} after"
            raise
        finally:
            now = self.clock()
            self.note(f"%s: {end} %s", name, format_duration(now - started), now=now)
