"""Model properties: permutations, padding, the combined loss, NaN-free edge cases."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.core.model_families import get_model
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.models import build_model
from tfr_rankformer.ranking.losses import OrdinalListLoss, get_score_loss  # noqa: E402

D = 3
SMALL = ModelConfig(num_layers=2, num_heads=1, ff_dim=8, dropout=0.0, head_hidden=4)


def _manifest(d=D):
    return {
        "num_features": d,
        "normalization": {
            "method": "standard",
            "standard": {"mean": [0.5] * d, "std": [2.0] * d},
            "log1p": {"mean": [0.0] * d, "std": [1.0] * d},
            "quantile": {"values": [[0.0, 1.0]] * d, "num_quantiles": 2},
            "min": [0.0] * d,
            "max": [1.0] * d,
        },
    }


def _model(name):
    tf.keras.utils.set_random_seed(0)
    return build_model(name, _manifest(), SMALL, levels=2)


def _batch(seed=0, batch=2, items=5):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(batch, items, D)).astype(np.float32)
    mask = np.ones((batch, items), dtype=bool)
    mask[1, 3:] = False
    return features, mask


def _run(model, features, mask):
    outputs = model({"features": features, "mask": mask}, training=False)
    return {k: v.numpy() for k, v in outputs.items()}


@pytest.mark.parametrize("name", ["rankformer", "transformer", "mlp"])
def test_permuting_items_permutes_scores_and_keeps_the_list_output(name):
    model = _model(name)
    features, mask = _batch()
    before = _run(model, features, mask)
    order = np.array([4, 2, 0, 1, 3])
    after = _run(model, features[:, order], mask[:, order])
    np.testing.assert_allclose(after["scores"], before["scores"][:, order], rtol=1e-5, atol=1e-5)
    if get_model(name).has_list_head:
        np.testing.assert_allclose(after["list_quality"], before["list_quality"], atol=1e-5)
        assert before["list_quality"].shape == (2, 2)


@pytest.mark.parametrize("name", ["rankformer", "transformer", "mlp"])
def test_padding_items_change_no_valid_score(name):
    model = _model(name)
    features, mask = _batch()
    before = _run(model, features, mask)
    noise = np.random.default_rng(5).normal(size=(2, 4, D)).astype(np.float32) * 100
    padded = _run(
        model,
        np.concatenate([features, noise], axis=1),
        np.concatenate([mask, np.zeros((2, 4), bool)], axis=1),
    )
    np.testing.assert_allclose(padded["scores"][:, :5][mask], before["scores"][mask], atol=1e-5)
    assert (padded["scores"][:, 5:] == -1e9).all() and (before["scores"][~mask] == -1e9).all()
    if get_model(name).has_list_head:
        np.testing.assert_allclose(padded["list_quality"], before["list_quality"], atol=1e-5)


def test_empty_and_fully_masked_lists_give_finite_loss_and_gradients():
    model = _model("rankformer")
    features = np.random.default_rng(1).normal(size=(3, 4, D)).astype(np.float32)
    mask = np.array([[True] * 4, [True, True, False, False], [False] * 4])
    labels = np.array([[0, 0, 0, 0], [1, 0, -1, -1], [-1, -1, -1, -1]], np.float32)
    list_labels = np.array([[0.0], [1.0], [0.0]], np.float32)
    with tf.GradientTape() as tape:
        out = model({"features": features, "mask": mask}, training=True)
        loss = get_score_loss("softmax").build(2)(labels, out["scores"]) + OrdinalListLoss(2)(
            list_labels, out["list_quality"]
        )
    grads = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(float(loss))
    assert all(np.isfinite(g.numpy()).all() for g in grads if g is not None)


def test_unknown_model_and_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="Unknown model"):
        build_model("gbdt", _manifest(), SMALL, 2)
    with pytest.raises(ValueError, match="num_layers"):
        ModelConfig(num_layers=0)
    with pytest.raises(ValueError, match="divisible"):
        build_model("rankformer", _manifest(d=3), ModelConfig(num_heads=2), 2)
