"""Publishing a converted directory: built in a scratch directory, then renamed.

Every conversion writes into a scratch directory beside its output and only
renames it into place when complete, so a failure leaves nothing partial.
"""

from __future__ import annotations

import os
import shutil

__all__ = ["publish"]


def publish(scratch: str, final: str) -> None:
    """Replaces ``final`` (a file or directory, if any) with the complete ``scratch``."""
    if os.path.exists(final):
        shutil.rmtree(final) if os.path.isdir(final) else os.remove(final)
    os.rename(scratch, final)
