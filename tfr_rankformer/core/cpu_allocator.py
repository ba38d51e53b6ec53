"""TensorFlow's pooled (BFC) CPU allocator, asked for when ``tfr_rankformer`` is imported,
before TensorFlow creates its first tensor: by default each large CPU tensor of a training
step maps fresh pages from ``malloc`` and pays for them in page faults.
"""

from __future__ import annotations

import os

ENV_VAR = "TF_CPU_ALLOCATOR_USE_BFC"


def use_pooled_cpu_allocator() -> None:
    """Asks for the BFC allocator unless the user set ``TF_CPU_ALLOCATOR_USE_BFC``."""
    os.environ.setdefault(ENV_VAR, "true")
