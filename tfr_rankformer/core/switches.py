"""On/off switches for code paths chosen when layers trace, overridden by the environment.

>>> switch = Switch("TFR_RANKFORMER_EXAMPLE_SWITCH", initial=False)
>>> with switch.default(True):
...     switch.enabled()
True
>>> switch.enabled()
False
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


class Switch:
    """``env`` when set (``0``/``false``/``off``/``no``: off), else the innermost
    :meth:`default`, else ``initial``."""

    def __init__(self, env: str, *, initial: bool):
        self.env = env
        self._defaults = [bool(initial)]

    def enabled(self) -> bool:
        value = os.environ.get(self.env)
        if value is None or not value.strip():
            return self._defaults[-1]
        return value.strip().lower() not in ("0", "false", "off", "no")

    @contextlib.contextmanager
    def default(self, on: bool) -> Iterator[None]:
        """Within the block the path is ``on`` unless the environment says otherwise."""
        self._defaults.append(bool(on))
        try:
            yield
        finally:
            self._defaults.pop()
