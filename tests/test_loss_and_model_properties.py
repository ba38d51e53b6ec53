"""Properties every registered loss and model must have, checked over the whole registry."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import identity_manifest  # noqa: E402
from tfr_rankformer.core.model_families import FEATURES_KIND, get_model, model_names
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.models import build_model
from tfr_rankformer.ranking.losses import SCORE_LOSSES, OrdinalListLoss, get_score_loss  # noqa: E402

D = 4
LEVELS = 2
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ModelConfig(
    num_layers=2,
    num_heads=1,
    ff_dim=8,
    dropout=0.0,
    head_hidden=4,
    d_fc=8,
    mlp_units=(8, 4),
    global_tokens=2,
)


_BUILT: dict = {}


def _model(name, loss="softmax", config=TINY):
    """A tiny model; built once per (model, kind of score output, settings): no test trains it."""
    levels = LEVELS if get_score_loss(loss).output == "item_levels" else None
    key = (name, levels, config)
    if key not in _BUILT:
        tf.keras.utils.set_random_seed(0)
        _BUILT[key] = build_model(name, identity_manifest(D), config, LEVELS, item_levels=levels)
    return _BUILT[key]


def _loss(model_name, loss_name, outputs, labels):
    """The training loss: the item loss plus, with a list head, the listwide term."""
    spec = get_score_loss(loss_name)
    total = spec.build(LEVELS)(labels, outputs[spec.output])
    if get_model(model_name).has_list_head:
        valid = tf.where(labels >= 0, labels, 0.0)
        t = tf.reduce_max(valid, axis=-1, keepdims=True)
        total += 0.25 * OrdinalListLoss(LEVELS)(t, outputs["list_quality"])
    return total


PAIRS = [(m, loss) for m in model_names(FEATURES_KIND) for loss in sorted(SCORE_LOSSES)]


@pytest.mark.parametrize("model_name,loss_name", PAIRS)
def test_masking_an_item_equals_removing_it(model_name, loss_name):
    model = _model(model_name, loss_name)
    rng = np.random.default_rng(1)
    features = rng.normal(size=(2, 5, D)).astype(np.float32)
    # Item 3 is padding. Labels differ within a list: ListMLE breaks ties in a
    # random order, which depends on the list's length.
    labels = np.array([[3, 0, 1, -1, 2], [1, 0, 2, -1, 3]], np.float32)
    mask = labels >= 0
    kept = [0, 1, 2, 4]
    # Scrambled features under the mask must not matter either.
    scrambled = features.copy()
    scrambled[:, 3] = 100.0
    masked = model({"features": scrambled, "mask": mask}, training=False)
    removed = model({"features": features[:, kept], "mask": mask[:, kept]}, training=False)
    np.testing.assert_allclose(
        masked["scores"].numpy()[:, kept], removed["scores"].numpy(), rtol=1e-4, atol=1e-5
    )
    loss_masked = float(_loss(model_name, loss_name, masked, labels))
    loss_removed = float(_loss(model_name, loss_name, removed, labels[:, kept]))
    assert loss_masked == pytest.approx(loss_removed, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("model_name,loss_name", PAIRS)
def test_gradients_stay_finite_for_zero_labels_and_masked_lists(model_name, loss_name):
    model = _model(model_name, loss_name)
    features = np.random.default_rng(2).normal(size=(3, 4, D)).astype(np.float32)
    labels = np.array([[0, 0, 0, 0], [-1, -1, -1, -1], [2, 0, 1, -1]], np.float32)
    mask = labels >= 0
    with tf.GradientTape() as tape:
        outputs = model({"features": features, "mask": mask}, training=True)
        loss = _loss(model_name, loss_name, outputs, labels)
    grads = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(float(loss))
    assert any(g is not None for g in grads)
    for g in grads:
        if g is not None:
            assert np.isfinite(tf.convert_to_tensor(g).numpy()).all()


def _predictions(loss_name, scores):
    """What the loss reads for item scores ``s``: the scores, or level logits ranking alike."""
    scores = tf.constant(scores, tf.float32)
    if get_score_loss(loss_name).output == "scores":
        return scores
    # Logit k is s - 3 (k - 1.5): with s = 3 (y - 1) every level is on the side y puts it.
    offsets = 3.0 * (tf.range(1, LEVELS + 1, dtype=tf.float32) - 1.5)
    return scores[..., tf.newaxis] - offsets


@pytest.mark.parametrize("loss_name", sorted(SCORE_LOSSES))
def test_the_ideal_ranking_costs_less_than_the_reversed_one(loss_name):
    labels = np.array([[2, 1, 1, 0, 0, -1]], np.float32)
    ideal = 3.0 * (labels - 1.0)
    ideal[labels < 0] = -1e9
    reversed_scores = ideal.copy()
    reversed_scores[0, :5] = ideal[0, :5][::-1]
    loss = get_score_loss(loss_name).build(LEVELS)
    best = float(loss(labels, _predictions(loss_name, ideal)))
    worst = float(loss(labels, _predictions(loss_name, reversed_scores)))
    assert best < worst


@pytest.mark.parametrize("model_name", model_names(FEATURES_KIND))
def test_models_without_positional_encoding_are_permutation_equivariant(model_name):
    model = _model(model_name)
    features = np.random.default_rng(3).normal(size=(2, 6, D)).astype(np.float32)
    mask = np.ones((2, 6), bool)
    mask[1, 4:] = False
    order = np.array([5, 2, 0, 4, 1, 3])
    before = model({"features": features, "mask": mask}, training=False)
    after = model({"features": features[:, order], "mask": mask[:, order]}, training=False)
    np.testing.assert_allclose(
        after["scores"].numpy(), before["scores"].numpy()[:, order], rtol=1e-4, atol=1e-5
    )
    if get_model(model_name).has_list_head:
        np.testing.assert_allclose(
            after["list_quality"].numpy(), before["list_quality"].numpy(), atol=1e-5
        )


@pytest.mark.parametrize("encoding", ["fixed", "learned"])
def test_positional_encoding_makes_the_order_matter(encoding):
    config = ModelConfig(**{**TINY.__dict__, "positional_encoding": encoding})
    model = _model("context_aware", config=config)
    if encoding == "learned":  # random_normal embeddings are small; make them count
        layer = model.get_layer("ranker").get_layer("positional_encoding")
        layer.embeddings.assign(tf.random.normal(layer.embeddings.shape, stddev=5.0, seed=0))
    features = np.random.default_rng(4).normal(size=(1, 6, D)).astype(np.float32)
    mask = np.ones((1, 6), bool)
    order = np.array([5, 2, 0, 4, 1, 3])
    before = model({"features": features, "mask": mask}, training=False)["scores"].numpy()
    after = model({"features": features[:, order], "mask": mask[:, order]}, training=False)
    assert not np.allclose(after["scores"].numpy(), before[:, order], atol=1e-3)


def test_positional_encoding_belongs_to_context_aware_only():
    with pytest.raises(ValueError, match="takes no positional encoding"):
        ModelConfig(positional_encoding="fixed").resolved("rankformer")
    with pytest.raises(ValueError, match="positional_encoding"):
        ModelConfig(positional_encoding="rotary")


def test_presets_follow_each_paper():
    context = ModelConfig().resolved("context_aware")
    assert (context.d_fc, context.num_layers, context.num_heads) == (144, 4, 2)
    assert (context.ff_dim, context.dropout) == (512, 0.4)
    rankformer = ModelConfig().resolved("rankformer")
    assert (rankformer.num_layers, rankformer.num_heads, rankformer.ff_dim) == (3, 1, 512)
    assert (rankformer.dropout, rankformer.head_hidden) == (0.25, 128)
    assert ModelConfig(num_layers=2).resolved("context_aware").num_layers == 2


_MEMORY_SCRIPT = """
import resource, sys
import tensorflow as tf
from tfr_rankformer.model.encoder_layer import PreNormEncoderLayer
from tfr_rankformer.model.peer_layers import GlobalLocalEncoderLayer

settings = dict(num_heads=1, ff_dim=32, dropout=0.0)
if sys.argv[1] == "global_local":
    layer = GlobalLocalEncoderLayer(num_global=3, **settings)
else:
    layer = PreNormEncoderLayer(**settings)
x, mask = tf.random.normal([16, 4096, 16]), tf.ones([16, 4096], tf.bool)
layer(x[:1, :8], mask[:1, :8])  # build
pages = int(open("/proc/self/statm").read().split()[0])
limit = pages * resource.getpagesize() + (1 << 30)  # 1 GiB more than now
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    layer(x, mask)
    print("fits")
except tf.errors.ResourceExhaustedError:
    print("out of memory")
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc")
def test_global_local_attention_fits_4096_items_where_full_attention_does_not():
    # 16 lists of 4,096 items with 1 GiB to spare: full attention's weights alone
    # take 16 x 4097^2 x 4 bytes = 1.07 GB; global-local attention's take 1.3 MB.
    outcomes = {}
    for kind in ("global_local", "full"):
        result = subprocess.run(
            [sys.executable, "-c", _MEMORY_SCRIPT, kind],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": ROOT},
        )
        outcomes[kind] = result.stdout.strip().splitlines()[-1:] or [result.stderr[-500:]]
    assert outcomes == {"global_local": ["fits"], "full": ["out of memory"]}
