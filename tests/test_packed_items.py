"""Packed items: the encoder's item-wise parts on the valid items alone compute the same."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tests.conftest import identity_manifest  # noqa: E402
from tfr_rankformer.model import compiled_ops, packed_items  # noqa: E402
from tfr_rankformer.model.encoder_layer import PreNormEncoderLayer  # noqa: E402
from tfr_rankformer.model.model_config import ModelConfig  # noqa: E402
from tfr_rankformer.model.models import build_model, ranker_of  # noqa: E402

MASK = np.array([[True] * 5, [True, True, False, False, False], [True, False, True, True, False]])


def _random(*shape, seed=0):
    return tf.constant(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_pack_keeps_valid_rows_in_order_and_pads_to_the_block():
    x = _random(3, 5, 2)
    rows = packed_items.valid_rows(tf.constant(MASK))
    packed = packed_items.pack(x, rows, block=4)
    assert packed.shape == (12, 2)  # 10 valid rows -> 12
    np.testing.assert_array_equal(packed[:10], x.numpy()[MASK])
    np.testing.assert_array_equal(packed[10:], 0.0)
    back = packed_items.unpack(packed, rows, tf.shape(MASK))
    np.testing.assert_array_equal(back, np.where(MASK[..., None], x.numpy(), 0.0))


def test_pack_and_unpack_gradients_are_dense_and_skip_padding():
    x = _random(3, 5, 2)
    rows = packed_items.valid_rows(tf.constant(MASK))
    weights = _random(12, 2, seed=1)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        packed = packed_items.pack(x, rows, block=4)
        packed_loss = tf.reduce_sum(weights * packed)
        tape.watch(packed)
        unpacked_loss = tf.reduce_sum(x * packed_items.unpack(packed, rows, tf.shape(MASK)))
    through_pack = tape.gradient(packed_loss, x)
    assert isinstance(through_pack, tf.Tensor)  # not IndexedSlices
    expected = np.zeros((3, 5, 2), np.float32)
    expected[MASK] = weights.numpy()[:10]
    np.testing.assert_array_equal(through_pack, expected)
    through_unpack = tape.gradient(unpacked_loss, packed).numpy()
    np.testing.assert_array_equal(through_unpack[:10], x.numpy()[MASK])
    np.testing.assert_array_equal(through_unpack[10:], 0.0)  # the zero rows feed nothing


def _encoder(packed: bool, dropout: float, x, seed: int = 4):
    """The encoder layer's training output and gradients, packed or plain (neither
    compiled where the plain path would be)."""
    tf.keras.utils.set_random_seed(seed)
    layer = PreNormEncoderLayer(num_heads=2, ff_dim=16, dropout=dropout)
    with compiled_ops.default(False), packed_items.default(packed):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, tf.constant(MASK), training=True)
            loss = tf.reduce_sum(tf.where(MASK[..., None], y, 0.0) ** 2)
    gradients = tape.gradient(loss, [x, *layer.trainable_variables])
    return y.numpy(), [g.numpy() for g in gradients]


def test_packed_encoder_layer_equals_the_plain_one_without_dropout():
    x = _random(3, 5, 8, seed=2)
    packed, packed_gradients = _encoder(True, 0.0, x)
    plain, plain_gradients = _encoder(False, 0.0, x)
    np.testing.assert_allclose(packed[MASK], plain[MASK], atol=1e-5)
    np.testing.assert_array_equal(packed[~MASK], 0.0)
    for got, expected in zip(packed_gradients, plain_gradients):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_padding_never_reaches_valid_items_of_a_packed_layer_with_dropout():
    x = _random(3, 5, 8, seed=2)
    other = tf.where(MASK[..., None], x, 100.0)  # different padding features
    first, _ = _encoder(True, 0.25, x)
    second, _ = _encoder(True, 0.25, other)
    np.testing.assert_array_equal(first[MASK], second[MASK])
    plain, _ = _encoder(False, 0.25, x)
    assert not np.allclose(first[MASK], plain[MASK])  # dropout is on: masks differ by layout


def test_packed_rankformer_scores_equal_the_plain_ones_without_dropout():
    config = ModelConfig(num_layers=2, num_heads=1, ff_dim=8, dropout=0.0, head_hidden=4)
    tf.keras.utils.set_random_seed(0)
    ranker = ranker_of(build_model("rankformer", identity_manifest(8), config, 2))
    inputs = {"features": _random(3, 5, 8, seed=3), "mask": tf.constant(MASK)}
    outputs = {}
    for packed in (False, True):
        with compiled_ops.default(False), packed_items.default(packed):
            outputs[packed] = ranker(inputs, training=True)
    np.testing.assert_allclose(outputs[True]["scores"], outputs[False]["scores"], atol=1e-5)
    np.testing.assert_allclose(
        outputs[True]["list_quality"], outputs[False]["list_quality"], atol=1e-5
    )


def test_the_switch_overrides_the_default(monkeypatch):
    monkeypatch.setenv(packed_items.ENV_SWITCH, "0")
    with packed_items.default(True):
        assert not packed_items.enabled()
    monkeypatch.setenv(packed_items.ENV_SWITCH, "1")
    assert packed_items.enabled()
    monkeypatch.delenv(packed_items.ENV_SWITCH)
    assert not packed_items.enabled()
    with packed_items.default(True):
        assert packed_items.enabled()
