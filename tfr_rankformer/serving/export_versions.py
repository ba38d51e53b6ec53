"""A run's export versions: ``model_dir/export/<version>/``, numbered 1, 2, ..., never
overwritten, and written whole (a text run also writes ``export_token_ids/<version>/``).

Both exports (``export`` for feature-vector runs, ``text_export`` for text
runs) save through ``write_version``: the SavedModel is written under a
temporary name (``export/.<version>.partial``) and renamed into place, so a
killed export leaves no version directory behind (the next one clears its
partial copy). The temporary name sits in the versions' own directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from tfr_rankformer.core import fault_points
from tfr_rankformer.core.run_layout import EXPORT_NAME

__all__ = ["next_version", "write_version"]


def next_version(export_dir: str) -> int:
    """One more than the highest numbered version directory (1 for none)."""
    if not os.path.isdir(export_dir):
        return 1
    versions = [int(name) for name in os.listdir(export_dir) if name.isdigit()]
    return max(versions, default=0) + 1


def write_version(
    model_dir: str,
    version: int | None,
    save: Callable[[str], None],
    *,
    export_name: str = EXPORT_NAME,
) -> str:
    """Calls ``save(path)`` to write a SavedModel, then moves it to
    ``model_dir/<export_name>/<version>``; returns that path.

    Args:
      model_dir: the run's directory.
      version: the version number; ``None``: ``next_version``.
      save: writes the SavedModel into the directory it is given.
      export_name: the directory of versions (a TF Serving model's base path):
        ``export``, or a text run's ``export_token_ids``.

    Raises:
      FileExistsError: if the version directory exists.
    """
    export_dir = os.path.join(model_dir, export_name)
    version = version or next_version(export_dir)
    path = os.path.join(export_dir, str(version))
    if os.path.exists(path):
        raise FileExistsError(f"{path} exists; export versions are never overwritten")
    temporary = os.path.join(export_dir, f".{version}.partial")
    shutil.rmtree(temporary, ignore_errors=True)  # left by an export that was killed
    save(temporary)
    fault_points.reached("export.saved")
    os.replace(temporary, path)
    return path
