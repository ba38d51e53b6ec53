"""Weight initialisation schemes of the models' dense layers.

``pytorch``: ``torch.nn.Linear``'s default, and so the released code's: weights and biases
uniform in ``±1/sqrt(fan_in)``. ``keras``: Glorot-uniform weights, zero biases (allRank's
Xavier). Every call makes new initializers: Keras warns that one unseeded initializer
reused gives several weights identical values.
"""

from __future__ import annotations

import math

import tensorflow as tf

from tfr_rankformer.core.command_names import INITIALIZATIONS
from tfr_rankformer.model.projections import Dense


def check_init(init: str) -> str:
    """``init`` if it is a known scheme, else a ``ValueError``."""
    if init not in INITIALIZATIONS:
        raise ValueError(f"Unknown initialisation {init!r}; choose from {list(INITIALIZATIONS)}")
    return init


def kernel_initializer(fan_in: int, init: str) -> tf.keras.initializers.Initializer:
    """A dense kernel's initializer under ``init``."""
    if check_init(init) == "pytorch":
        return _uniform(fan_in)
    return tf.keras.initializers.GlorotUniform()


def bias_initializer(fan_in: int, init: str) -> tf.keras.initializers.Initializer:
    """A dense bias's initializer under ``init``."""
    if check_init(init) == "pytorch":
        return _uniform(fan_in)
    return tf.keras.initializers.Zeros()


def _uniform(fan_in: int) -> tf.keras.initializers.Initializer:
    # Given, not read off the shape: a kernel may be part of a larger Linear.
    bound = 1.0 / math.sqrt(fan_in)
    return tf.keras.initializers.RandomUniform(-bound, bound)


def dense(units: int, *, fan_in: int, init: str, **kwargs) -> Dense:
    """A ``projections.Dense`` of ``units`` outputs on ``fan_in`` inputs under ``init``."""
    return Dense(
        units,
        kernel_initializer=kernel_initializer(fan_in, init),
        bias_initializer=bias_initializer(fan_in, init),
        **kwargs,
    )
