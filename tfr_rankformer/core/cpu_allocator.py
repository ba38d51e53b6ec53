"""TensorFlow's pooled (BFC) CPU allocator, chosen before TensorFlow allocates anything.

By default TensorFlow 2.15 takes each large CPU tensor from ``malloc``, which
maps fresh pages for it and returns them when the tensor is freed, so every
intermediate tensor of a training step (the encoder's ``[items, 512]``
activations are 70 MB at batch 2048) is paid for in page faults: a simple
element-wise op over such a tensor took 4 times as long as with the pooled
allocator on a 2-core AMD EPYC. ``TF_CPU_ALLOCATOR_USE_BFC=true`` makes
TensorFlow keep and reuse the memory instead. TensorFlow reads the variable
when it creates its CPU allocator, at its first tensor, so
:func:`use_pooled_cpu_allocator` runs when ``tfr_rankformer`` is imported; a
value the user set is kept (``false`` turns the pool off).
"""

from __future__ import annotations

import os

__all__ = ["ENV_VAR", "use_pooled_cpu_allocator"]

ENV_VAR = "TF_CPU_ALLOCATOR_USE_BFC"


def use_pooled_cpu_allocator() -> None:
    """Asks for TensorFlow's BFC CPU allocator unless ``TF_CPU_ALLOCATOR_USE_BFC`` is set.

    Takes effect only if TensorFlow has not created a tensor yet in this process.
    """
    os.environ.setdefault(ENV_VAR, "true")
