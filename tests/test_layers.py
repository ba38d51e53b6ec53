"""The encoder's speed-motivated pieces against TensorFlow's own."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.model import compiled_ops  # noqa: E402
from tfr_rankformer.model.layers import FastDropout, LayerNorm, gelu  # noqa: E402


def test_gelu_and_its_gradient_match_tensorflow():
    x = tf.constant(np.linspace(-6, 6, 1001, dtype=np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = gelu(x)
        theirs = tf.nn.gelu(x, approximate=False)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-6)
    np.testing.assert_allclose(
        tape.gradient(ours, x).numpy(), tape.gradient(theirs, x).numpy(), atol=1e-5
    )


@pytest.mark.parametrize("shape", [(50, 7), (3, 17, 136)])
def test_layer_norm_in_training_has_keras_values_and_gradients(shape, monkeypatch):
    from tfr_rankformer.model import layers

    calls = []  # training calls must go through the written-out gradient

    def spied(*args):
        calls.append(args[0].shape)
        return written_out(*args)

    written_out = layers.layer_norm
    monkeypatch.setattr(layers, "layer_norm", spied)
    rng = np.random.default_rng(1)
    x = tf.constant((3 * rng.normal(size=shape) + 2).astype(np.float32))
    upstream = tf.constant(rng.normal(size=shape).astype(np.float32))
    ours, keras = LayerNorm(epsilon=1e-5), tf.keras.layers.LayerNormalization(epsilon=1e-5)
    for layer in (ours, keras):
        layer.build(x.shape)
        layer.set_weights([rng.normal(size=shape[-1]).astype(np.float32) for _ in range(2)])
    keras.set_weights(ours.get_weights())
    results = []
    for layer, training in ((ours, True), (keras, True), (ours, False)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=training)
        results.append([y, *tape.gradient(y, [x, *layer.trainable_variables], upstream)])
    # The closed-form backward pass (layers.layer_norm) against Keras's autodiff;
    # weight gradients are sums over the rows, compared relative to their size.
    for got, expected in zip(results[0], results[1]):
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(results[2][0].numpy(), results[1][0].numpy())
    assert calls == [x.shape]  # the training call only; inference kept Keras's ops


def test_fast_dropout_drops_at_the_rate_and_rescales():
    layer = FastDropout(0.25, seed=3)
    x = tf.ones([400, 513])  # an odd size: the last 16-bit draw is half used
    y = layer(x, training=True).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.005
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    assert (layer(x, training=False).numpy() == 1).all()
    # Successive calls draw new masks.
    assert (layer(x, training=True).numpy() != y).any()


def test_fast_dropout_is_seeded_and_validated():
    x = tf.ones([64, 64])
    first = FastDropout(0.5, seed=7)(x, training=True).numpy()
    second = FastDropout(0.5, seed=7)(x, training=True).numpy()
    np.testing.assert_array_equal(first, second)
    with pytest.raises(ValueError, match="rate"):
        FastDropout(1.0)


def _masks(layer, steps: int, shape=(64, 64)) -> np.ndarray:
    """``steps`` successive training masks of ``layer``, flattened into one sequence."""
    x = tf.ones(shape)
    return np.concatenate([layer(x, training=True).numpy().ravel() != 0 for _ in range(steps)])


def test_dropout_layers_draw_independent_streams_on_the_plain_path(monkeypatch):
    # ``Generator.from_seed`` gave every layer the key 0 and set only its
    # counter, so seed 6's first mask was seed 5's shifted by one Philox block
    # (8 mask elements): two layers' masks could coincide.
    monkeypatch.setenv(compiled_ops.ENV_SWITCH, "0")
    first = _masks(FastDropout(0.25, seed=5), steps=50)
    second = _masks(FastDropout(0.25, seed=6), steps=50)
    window = 1024
    for shift in range(-1024, 1025):
        a = first[max(shift, 0) : max(shift, 0) + window]
        b = second[max(-shift, 0) : max(-shift, 0) + window]
        assert (a != b).any(), f"the masks coincide at a shift of {shift} draws"
    correlation = np.corrcoef(first, second)[0, 1]
    assert abs(correlation) < 0.01  # 204,800 draws: one standard error is 0.0022
    # Within one stream, successive masks are as unrelated.
    steps = first.reshape(50, -1)
    assert abs(np.corrcoef(steps[:-1].ravel(), steps[1:].ravel())[0, 1]) < 0.01


def test_models_draw_a_different_seed_for_every_dropout_layer(monkeypatch):
    monkeypatch.setenv(compiled_ops.ENV_SWITCH, "0")
    tf.keras.utils.set_random_seed(0)
    layers = [FastDropout(0.25) for _ in range(4)]
    masks = [_masks(layer, steps=4) for layer in layers]
    for i in range(len(masks)):
        for j in range(i):
            assert abs(np.corrcoef(masks[i], masks[j])[0, 1]) < 0.03
    tf.keras.utils.set_random_seed(0)
    again = [_masks(FastDropout(0.25), steps=4) for _ in range(4)]
    for mask, same in zip(masks, again):
        np.testing.assert_array_equal(mask, same)


@pytest.mark.parametrize("rate", [0.1, 0.25, 0.5])
def test_compiled_and_plain_dropout_keep_at_the_same_rate(monkeypatch, rate):
    kept = {}
    for switch in ("0", "1"):
        monkeypatch.setenv(compiled_ops.ENV_SWITCH, switch)
        kept[switch] = _masks(FastDropout(rate, seed=11), steps=25, shape=(256, 256)).mean()
    # 1.6M draws each: one standard error of a keep rate is under 0.0004.
    assert abs(kept["0"] - (1 - rate)) < 0.002
    assert abs(kept["1"] - (1 - rate)) < 0.002
    assert abs(kept["0"] - kept["1"]) < 0.003
