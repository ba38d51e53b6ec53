"""A progress bar over a file's bytes that also shows items and items/s."""

from __future__ import annotations

import time


class FileProgress:
    """A tqdm bar; call it with ``(bytes read, items processed)``.

    Args:
      description: the bar's label.
      total: the file's size in bytes.
      enabled: ``False`` hides it; otherwise it shows on terminals only.
    """

    def __init__(self, description: str, total: int | None, enabled: bool):
        from tqdm.auto import tqdm

        self._bar = tqdm(
            total=total,
            desc=description,
            unit="B",
            unit_scale=True,
            disable=None if enabled else True,
            leave=False,
        )
        self._start = time.perf_counter()
        self._bytes = 0

    def __call__(self, bytes_read: int, items: int) -> None:
        self._bar.update(bytes_read - self._bytes)
        self._bytes = bytes_read
        rate = items / max(time.perf_counter() - self._start, 1e-9)
        self._bar.set_postfix_str(f"{items:,} items, {rate:,.0f} items/s", refresh=False)

    def close(self) -> None:
        self._bar.close()
