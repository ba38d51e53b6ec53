"""Dense layers whose gradients take the faster route on CPU, and the initialisation
schemes ``pytorch`` (``torch.nn.Linear``'s) and ``keras`` (Glorot-uniform, zero biases);
initializers are made anew per weight (one reused gives several weights equal values).
"""

from __future__ import annotations

import math

import tensorflow as tf

from tfr_rankformer.core.command_names import INITIALIZATIONS
from tfr_rankformer.model.serializable import serializable


def column_sums(t):
    """``t`` summed over every axis but the last, ``[..., n] -> [n]``, as a product."""
    flat = tf.reshape(t, [-1, t.shape[-1]])
    ones = tf.ones(tf.stack([1, tf.shape(flat)[0]]), t.dtype)
    return tf.reshape(tf.matmul(ones, flat), [-1])


def bias_add(x, bias):
    """``x + bias`` over the last axis; the bias's gradient is :func:`column_sums`."""

    @tf.custom_gradient
    def apply(x, bias):
        def gradient(upstream):
            return upstream, column_sums(upstream)

        return tf.nn.bias_add(x, bias), gradient

    return apply(x, bias)


def _kernel_gradient(x, upstream):
    """``x^T @ upstream`` (``[rows, n_in]``, ``[rows, n_out]`` -> ``[n_in, n_out]``)."""
    if x.shape[-1] is not None and upstream.shape[-1] is not None:
        if x.shape[-1] > upstream.shape[-1]:
            return tf.transpose(tf.matmul(upstream, x, transpose_a=True))
    return tf.matmul(x, upstream, transpose_a=True)


@tf.custom_gradient
def _matmul_2d(x, kernel):
    def gradient(upstream):
        return tf.matmul(upstream, kernel, transpose_b=True), _kernel_gradient(x, upstream)

    return tf.matmul(x, kernel), gradient


def matmul_last_axis(x, kernel):
    """``tf.tensordot(x, kernel, 1)`` as one 2-D product."""
    n_out = kernel.shape[-1]
    if x.shape.rank == 2:
        return _matmul_2d(x, kernel)
    flat = tf.reshape(x, [-1, x.shape[-1]])  # [..., n_in] -> [rows, n_in]
    out = _matmul_2d(flat, kernel)
    return tf.reshape(out, tf.concat([tf.shape(x)[:-1], [n_out]], axis=0))  # -> [..., n_out]


@serializable
class Dense(tf.keras.layers.Dense):
    """``tf.keras.layers.Dense`` whose product is :func:`matmul_last_axis` (dense inputs)."""

    def call(self, inputs):
        if isinstance(inputs, (tf.SparseTensor, tf.RaggedTensor)) or inputs.shape.rank is None:
            return super().call(inputs)
        if inputs.dtype != self.compute_dtype:
            inputs = tf.cast(inputs, self.compute_dtype)
        outputs = matmul_last_axis(inputs, tf.cast(self.kernel, inputs.dtype))
        if self.use_bias:
            # column_sums sums in the tensor's dtype: float16 keeps BiasAddGrad.
            add = bias_add if outputs.dtype in (tf.float32, tf.bfloat16) else tf.nn.bias_add
            outputs = add(outputs, tf.cast(self.bias, outputs.dtype))
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs


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
