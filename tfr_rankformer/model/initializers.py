"""Weight initialisation schemes for the models' dense layers.

``pytorch``: what ``torch.nn.Linear`` draws by default, and so the RankFormer
authors' released code: weights and biases uniform in ``±1/sqrt(fan_in)``
(Kaiming-uniform with ``a = sqrt(5)``). The attention's input projection is
Xavier-uniform with zero biases and its output projection has zero biases, as
``torch.nn.MultiheadAttention`` sets them.

``keras``: Keras's defaults, Glorot(Xavier)-uniform weights and zero biases
(also allRank's Xavier initialisation of every weight matrix).

Every call makes new initializer objects: Keras warns that an unseeded
initializer object reused for several weights gives them identical values.
"""

from __future__ import annotations

import math

import tensorflow as tf

from tfr_rankformer.core.command_names import INITIALIZATIONS
from tfr_rankformer.model.projections import Dense

__all__ = ["INITIALIZATIONS", "check_init", "dense", "kernel_initializer", "bias_initializer"]


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
    # Given fan_in, not read off the weight's shape: a kernel may be part of a
    # larger Linear (ItemAndContextHead's halves).
    bound = 1.0 / math.sqrt(fan_in)
    return tf.keras.initializers.RandomUniform(-bound, bound)


def dense(units: int, *, fan_in: int, init: str, **kwargs) -> Dense:
    """A ``Dense`` layer (``projections.Dense``) of ``units`` outputs on ``fan_in``
    inputs, initialised by ``init``."""
    return Dense(
        units,
        kernel_initializer=kernel_initializer(fan_in, init),
        bias_initializer=bias_initializer(fan_in, init),
        **kwargs,
    )
