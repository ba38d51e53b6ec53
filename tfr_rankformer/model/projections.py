"""Dense products over the last axis whose weight and bias gradients take the faster route on CPU.

A dense layer on ``[rows, n_in]`` inputs with ``[rows, n_out]`` upstream
gradients gets its kernel's gradient from ``x^T @ upstream``, a product over
the ``rows`` (tens of thousands of items in a training batch). TensorFlow's
CPU matmul runs it twice as fast when the transposed operand is the narrower
of the two: for the feed-forward block's 512 -> 46 projection, ``(upstream^T @
x)^T`` took half the time of ``x^T @ upstream``. :func:`matmul_last_axis`
picks the order by the widths, and :class:`Dense` (Keras's ``Dense`` with the
same weights, config and results) uses it.

A bias's gradient is the upstream gradient summed over the rows.
TensorFlow's CPU reduction over rows (``BiasAddGrad``, ``reduce_sum`` over
axis 0) reads a ``[34816, 512]`` tensor at a quarter of the speed of a matrix
product with a row of ones, so :func:`column_sums` takes the product: float32
``Dense`` layers use it for their bias (:func:`bias_add`), and training's
layer norms for their weights.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["Dense", "bias_add", "column_sums", "matmul_last_axis"]


def column_sums(t):
    """``t`` summed over every axis but the last, ``[..., n] -> [n]``, as
    ``ones[1, rows] @ t[rows, n]`` (float32)."""
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
    """``x @ kernel`` over ``x``'s last axis, as one 2-D product.

    Args:
      x: ``[..., n_in]`` float tensor.
      kernel: ``[n_in, n_out]``, ``x``'s dtype.

    Returns:
      ``[..., n_out]``; the same values and gradients as ``tf.tensordot(x, kernel, 1)``.
    """
    n_out = kernel.shape[-1]
    if x.shape.rank == 2:
        return _matmul_2d(x, kernel)
    flat = tf.reshape(x, [-1, x.shape[-1]])  # [..., n_in] -> [rows, n_in]
    out = _matmul_2d(flat, kernel)
    return tf.reshape(out, tf.concat([tf.shape(x)[:-1], [n_out]], axis=0))  # -> [..., n_out]


@tf.keras.utils.register_keras_serializable(package="tfr_rankformer")
class Dense(tf.keras.layers.Dense):
    """``tf.keras.layers.Dense`` whose product is :func:`matmul_last_axis` (dense inputs)."""

    def call(self, inputs):
        if isinstance(inputs, (tf.SparseTensor, tf.RaggedTensor)) or inputs.shape.rank is None:
            return super().call(inputs)
        if inputs.dtype != self.compute_dtype:
            inputs = tf.cast(inputs, self.compute_dtype)
        outputs = matmul_last_axis(inputs, tf.cast(self.kernel, inputs.dtype))
        if self.use_bias:
            # column_sums sums in the tensor's dtype: float16 keeps BiasAddGrad
            # (bfloat16 has float32's range, and the product accumulates in float32).
            add = bias_add if outputs.dtype in (tf.float32, tf.bfloat16) else tf.nn.bias_add
            outputs = add(outputs, tf.cast(self.bias, outputs.dtype))
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
