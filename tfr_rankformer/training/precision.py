"""A training run's compute precision, and the Keras dtype policy that carries it (``bf16``
and ``float16`` are mixed: float32 variables, heads and normalisation).
"""

from __future__ import annotations

import contextlib

_KERAS_POLICIES = {"float32": "float32", "bf16": "mixed_bfloat16", "float16": "mixed_float16"}


def _alias(mixed_precision: bool) -> str:
    return "float16" if mixed_precision else "float32"


def check_precision(precision: str | None, mixed_precision: bool | None) -> None:
    """Refuses a ``precision`` that its alias ``mixed_precision`` contradicts."""
    if None not in (precision, mixed_precision) and precision != _alias(mixed_precision):
        raise ValueError(
            f"`mixed_precision` {'on' if mixed_precision else 'off'} means `precision` "
            f"{_alias(mixed_precision)}, which contradicts `precision` {precision}: "
            "give only one of them (`mixed_precision` on is `precision` float16)"
        )


def resolve_precision(precision: str | None, mixed_precision: bool | None, *, gpu: bool) -> str:
    """``precision``, else ``mixed_precision``'s, else float16 on a GPU and float32 without.

    >>> resolve_precision(None, None, gpu=False), resolve_precision(None, True, gpu=False)
    ('float32', 'float16')
    """
    if precision is not None:
        return precision
    return _alias(gpu if mixed_precision is None else mixed_precision)


def cpu_precision_warning(precision: str, *, gpu: bool, native_bf16: bool | None) -> str | None:
    """A warning when ``precision`` runs slowly on this CPU."""
    if gpu:
        return None
    if precision == "bf16" and native_bf16 is False:
        return (
            "precision bf16 on a CPU without bfloat16 instructions (avx512_bf16, amx_bf16): "
            "emulated, likely slower than float32"
        )
    if precision == "float16":
        return (
            "precision float16 on a CPU: TensorFlow computes float16 slowly there; float16 "
            "is for GPUs, bf16 is a CPU's mixed precision"
        )
    return None


def native_bf16_cpu(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU computes bfloat16 in hardware; ``None`` if it cannot be told."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            flags = set(f.read().split())
    except OSError:
        return None
    return bool(flags & {"avx512_bf16", "amx_bf16"})


@contextlib.contextmanager
def precision_policy(precision: str):
    """Keras's global policy set to ``precision``'s inside the block."""
    import tensorflow as tf

    previous = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy(_KERAS_POLICIES[precision])
    try:
        yield
    finally:
        tf.keras.mixed_precision.set_global_policy(previous)
