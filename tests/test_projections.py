"""``projections.Dense`` against Keras's ``Dense`` on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.model.projections import Dense, column_sums, matmul_last_axis  # noqa: E402


@pytest.mark.parametrize("shape,units", [((6, 12), 3), ((2, 5, 3), 12), ((2, 5, 12), 3)])
def test_values_and_gradients_equal_keras_dense(shape, units):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=shape).astype(np.float32))
    upstream = tf.constant(rng.normal(size=(*shape[:-1], units)).astype(np.float32))
    ours = Dense(units, activation="relu", bias_initializer="glorot_uniform")
    keras = tf.keras.layers.Dense(units, activation="relu")
    ours.build(x.shape)
    keras.build(x.shape)
    keras.set_weights(ours.get_weights())
    results = []
    for layer in (ours, keras):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        results.append((y, tape.gradient(y, [x, *layer.trainable_variables], upstream)))
    np.testing.assert_allclose(results[0][0].numpy(), results[1][0].numpy(), atol=1e-5)
    for got, expected in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_config_round_trip_and_dynamic_leading_axes():
    layer = Dense(4, name="d")
    clone = tf.keras.layers.deserialize(tf.keras.layers.serialize(layer))
    assert isinstance(clone, Dense) and clone.units == 4

    @tf.function(input_signature=[tf.TensorSpec([None, None, 3])])
    def apply(x):
        return matmul_last_axis(x, tf.ones([3, 4]))

    assert apply(tf.ones([2, 7, 3])).shape == (2, 7, 4)


def test_column_sums_sum_every_axis_but_the_last_for_any_leading_shape():
    @tf.function(input_signature=[tf.TensorSpec([None, None, 3])])
    def sums(x):
        return column_sums(x)

    x = np.random.default_rng(2).normal(size=(4, 9, 3)).astype(np.float32)
    np.testing.assert_allclose(sums(tf.constant(x)).numpy(), x.sum(axis=(0, 1)), rtol=1e-5)
    assert sums(tf.zeros([0, 5, 3])).numpy().tolist() == [0.0, 0.0, 0.0]
