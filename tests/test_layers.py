"""The encoder's speed-motivated pieces against TensorFlow's own."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tfr_rankformer.layers import FastDropout, gelu  # noqa: E402


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
