"""The XLA-compiled training pieces against plain TensorFlow on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.model import compiled_ops  # noqa: E402
from tfr_rankformer.model.encoder_layer import PreNormEncoderLayer  # noqa: E402
from tfr_rankformer.model.layers import FastDropout, KeyedDropout  # noqa: E402

KEY = tf.constant([12345, -678], tf.int32)


def _value_and_gradients(function, inputs, upstream):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        y = function(*inputs)
    return y, tape.gradient(y, inputs, output_gradients=upstream)


def _random(*shape, seed=0):
    return tf.constant(np.random.default_rng(seed).normal(size=shape).astype(np.float32))


def test_without_dropout_it_is_gelu_of_the_sum_with_its_gradients():
    h, bias, upstream = _random(3, 5, 64), _random(64, seed=1), _random(3, 5, 64, seed=2)
    ours = _value_and_gradients(
        lambda h, b: compiled_ops.bias_gelu_dropout(h, b, KEY, 0.0), [h, bias], upstream
    )
    plain = _value_and_gradients(
        lambda h, b: tf.nn.gelu(h + b, approximate=False), [h, bias], upstream
    )
    np.testing.assert_allclose(ours[0].numpy(), plain[0].numpy(), atol=1e-5)
    for got, expected in zip(ours[1], plain[1]):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)


def test_dropout_keeps_at_the_rate_rescales_and_sends_gradients_through_the_same_mask():
    h, bias, upstream = _random(400, 512), _random(512, seed=1), _random(400, 512, seed=2)
    y, (dh, dbias) = _value_and_gradients(
        lambda h, b: compiled_ops.bias_gelu_dropout(h, b, KEY, 0.25), [h, bias], upstream
    )
    kept = compiled_ops.keep_mask(tf.shape(h), KEY, 0.25).numpy()
    assert abs(kept.mean() - 0.75) < 0.003
    gelu = tf.nn.gelu(h + bias, approximate=False).numpy()
    np.testing.assert_allclose(y.numpy(), np.where(kept, gelu / 0.75, 0.0), atol=1e-5)
    _, (plain_dh, plain_dbias) = _value_and_gradients(
        lambda h, b: tf.nn.gelu(h + b, approximate=False) * (kept / 0.75), [h, bias], upstream
    )
    np.testing.assert_allclose(dh.numpy(), plain_dh.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dbias.numpy(), plain_dbias.numpy(), rtol=1e-3, atol=1e-3)


def test_plain_dropout_piece_and_its_gradient():
    x, upstream = _random(7, 9, 33), _random(7, 9, 33, seed=1)
    y, (dx,) = _value_and_gradients(lambda x: compiled_ops.dropout(x, KEY, 0.5), [x], upstream)
    kept = compiled_ops.keep_mask(tf.shape(x), KEY, 0.5).numpy()
    np.testing.assert_allclose(y.numpy(), np.where(kept, 2 * x.numpy(), 0.0), rtol=1e-6)
    np.testing.assert_allclose(dx.numpy(), np.where(kept, 2 * upstream.numpy(), 0.0), rtol=1e-6)
    np.testing.assert_array_equal(compiled_ops.dropout(x, KEY, 0.0).numpy(), x.numpy())


def test_masks_follow_both_key_words_and_look_independent():
    shape = [256, 512]
    base = compiled_ops.keep_mask(shape, KEY, 0.25).numpy()
    np.testing.assert_array_equal(base, compiled_ops.keep_mask(shape, KEY, 0.25).numpy())
    for other in ([12346, -678], [12345, -677]):
        again = compiled_ops.keep_mask(shape, tf.constant(other), 0.25).numpy()
        # Independent masks keep an element in both with probability 0.75^2.
        assert abs((base & again).mean() - 0.5625) < 0.005
    # Neighbours (along rows and along columns) are uncorrelated too.
    assert abs((base[:, 1:] & base[:, :-1]).mean() - 0.5625) < 0.005
    assert abs((base[1:] & base[:-1]).mean() - 0.5625) < 0.005


def test_rates_are_validated():
    with pytest.raises(ValueError, match="rate"):
        compiled_ops.dropout(tf.ones([2]), KEY, 1.0)


def _encoder_outputs(monkeypatch, switch, dropout):
    monkeypatch.setenv(compiled_ops.ENV_SWITCH, switch)
    tf.keras.utils.set_random_seed(4)
    layer = PreNormEncoderLayer(num_heads=2, ff_dim=32, dropout=dropout)
    x = _random(3, 5, 8, seed=5)
    mask = tf.constant([[True] * 5, [True, True, True, False, False], [True] + [False] * 4])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, mask, training=True)
    gradients = tape.gradient(y, [x, *layer.trainable_variables])
    return y.numpy(), [g.numpy() for g in gradients]


def test_encoder_layer_with_compiled_pieces_equals_the_plain_layer(monkeypatch):
    # Without dropout the two paths compute the same function and gradients.
    ours, our_gradients = _encoder_outputs(monkeypatch, "1", 0.0)
    plain, plain_gradients = _encoder_outputs(monkeypatch, "0", 0.0)
    np.testing.assert_allclose(ours, plain, atol=1e-5)
    for got, expected in zip(our_gradients, plain_gradients):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_training_dropout_is_seeded_and_advances(monkeypatch):
    monkeypatch.setenv(compiled_ops.ENV_SWITCH, "1")
    x = tf.ones([64, 128])
    first = FastDropout(0.25, seed=7)
    y = first(x, training=True).numpy()
    assert abs((y != 0).mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[y != 0], 1 / 0.75, rtol=1e-6)
    np.testing.assert_array_equal(FastDropout(0.25, seed=7)(x, training=True).numpy(), y)
    assert (first(x, training=True).numpy() != y).any()
    assert (first(x, training=False).numpy() == 1).all()


def test_keyed_dropout_holds_no_variable_and_drops_at_the_rate(monkeypatch):
    monkeypatch.setenv(compiled_ops.ENV_SWITCH, "1")
    tf.keras.utils.set_random_seed(3)
    layer = KeyedDropout(0.25)
    x = tf.ones([64, 128])
    y = layer(x, training=True).numpy()
    assert not layer.weights
    assert abs((y != 0).mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[y != 0], 1 / 0.75, rtol=1e-6)
    assert (layer(x, training=True).numpy() != y).any()
    assert (layer(x, training=False).numpy() == 1).all()
