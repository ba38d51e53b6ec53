"""The RankFormer family's defaults against the authors' released code: the combined
loss under both scalings, the per-epoch schedule, the alpha = 0 model, allRank's settings."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import identity_manifest  # noqa: E402
from tfr_rankformer.inputs.manifest import Manifest  # noqa: E402
from tfr_rankformer.model.model_config import ModelConfig  # noqa: E402
from tfr_rankformer.ranking.losses import OrdinalListLoss, get_score_loss  # noqa: E402
from tfr_rankformer.training.optimizers import EpochSchedule, learning_rate_schedule  # noqa: E402
from tfr_rankformer.training.train_config import TrainConfig  # noqa: E402
from tfr_rankformer.training.training_setup import build_compiled_model, build_run_model  # noqa: E402

TINY = ModelConfig(num_layers=1, num_heads=1, ff_dim=8, dropout=0.0, head_hidden=4)


def _log_softmax(s):
    s = np.asarray(s, np.float64)
    return s - s.max() - np.log(np.exp(s - s.max()).sum())


def _bce(logit, target):
    p = 1.0 / (1.0 + np.exp(-logit))
    return -(target * np.log(p) + (1 - target) * np.log(1 - p))


def _batch(k):
    """Three lists: t = K (three items), t = 1 with a padded item, t = 0."""
    labels = np.array([[k, 0, 1], [0, 1, -1], [0, 0, 0]], np.float32)
    scores = np.array([[1.0, 0.5, -1.0], [0.2, 0.4, -1e9], [0.3, -0.1, 0.9]], np.float32)
    logits = np.random.default_rng(k).normal(size=(3, k)).astype(np.float32)
    return labels, scores, logits


def _expected(labels, scores, logits, *, scaling, alpha):
    """The formulas, list by list, in float64."""
    k = logits.shape[1]
    softmax, ordinal = [], []
    for y, s, d in zip(labels, scores, logits):
        valid = y >= 0
        term = -(y[valid] @ _log_softmax(s[valid]))  # -y^T log softmax(s)
        t = y[valid].max()
        bces = [_bce(float(d[j]), float(t >= j + 1)) for j in range(k)]
        if scaling == "released":
            softmax.append(term / valid.sum())  # mean over the list's items
            ordinal.append(np.mean(bces))  # mean over the levels
        else:
            softmax.append(term)
            ordinal.append(np.sum(bces))
    softmax = np.array(softmax)
    if scaling == "released":  # lists with a zero loss (here t = 0) leave the mean
        softmax_mean = softmax[softmax != 0].mean()
    else:
        softmax_mean = softmax.mean()
    return softmax_mean + alpha * np.mean(ordinal)


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("scaling", ["released", "paper"])
def test_combined_loss_equals_the_formulas(scaling, k):
    labels, scores, logits = _batch(k)
    alpha = 1.0 if scaling == "released" else 0.25
    list_labels = np.max(np.where(labels >= 0, labels, 0), axis=1, keepdims=True)
    softmax = get_score_loss("softmax").build(k, scaling)(labels, scores)
    ordinal = OrdinalListLoss(k, level_mean=scaling == "released")(list_labels, logits)
    expected = _expected(labels, scores, logits, scaling=scaling, alpha=alpha)
    assert float(softmax) + alpha * float(ordinal) == pytest.approx(expected, rel=1e-5)


def test_a_batch_of_zero_loss_lists_has_zero_loss_and_gradient():
    labels = np.zeros((2, 3), np.float32)
    scores = tf.Variable(np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32))
    with tf.GradientTape() as tape:
        loss = get_score_loss("softmax").build(2, "released")(labels, scores)
    assert float(loss) == 0.0
    np.testing.assert_array_equal(tape.gradient(loss, scores).numpy(), 0.0)


def _config(**overrides):
    return TrainConfig(data="d", model_dir="m", **overrides)


def _manifest(d: int = 3) -> Manifest:
    return Manifest.coerce({**identity_manifest(d), "max_relevance": 2})


@pytest.mark.parametrize("scaling,alpha", [("released", 1.0), ("paper", 0.25)])
def test_the_compiled_rankformer_loss_is_the_formula(scaling, alpha):
    """The wiring: item loss, listwide loss and alpha as ``fit`` computes them."""
    config = _config(architecture=TINY, loss_scaling=scaling)
    assert config.alpha == alpha
    tf.keras.utils.set_random_seed(0)
    _, ranker = build_compiled_model(config, _manifest(), steps_per_epoch=1, xla=False)
    labels, _, _ = _batch(2)
    features = np.random.default_rng(1).normal(size=(3, 3, 3)).astype(np.float32)
    inputs = {"features": features, "mask": labels >= 0}
    outputs = ranker(inputs, training=False)
    t = np.max(np.where(labels >= 0, labels, 0), axis=1, keepdims=True)
    targets = {"scores": tf.constant(labels), "list_quality": tf.constant(t)}
    loss = float(ranker.compute_loss(inputs, targets, outputs))
    scores = outputs["scores"].numpy()
    logits = outputs["list_quality"].numpy()
    assert loss == pytest.approx(
        _expected(labels, scores, logits, scaling=scaling, alpha=alpha), rel=1e-5
    )


def test_learning_rate_per_epoch_as_the_released_code():
    schedule = EpochSchedule(1e-3, steps_per_epoch=3, kind="epoch_inverse_sqrt", start=20)
    rates = {e: float(schedule(3 * e + 2)) for e in (0, 19, 20, 40, 199)}  # an epoch's last step
    expected = {0: 1e-3, 19: 1e-3, 20: 1e-3, 40: 1e-3 / np.sqrt(21), 199: 1e-3 / np.sqrt(180)}
    assert rates == pytest.approx(expected, rel=1e-6)
    assert float(schedule(3 * 40)) == pytest.approx(0.218e-3, rel=1e-3)  # first step of epoch 40


def test_step_decay_is_allranks_steplr():
    config = _config(model="context_aware", epochs=100)
    assert (config.optimizer, config.weight_decay, config.batch_size) == ("adam", 0.0, 64)
    assert (config.lr_schedule, config.decay_after_epoch) == ("step_decay", 50)
    schedule = learning_rate_schedule(config, steps_per_epoch=10)
    rates = [float(schedule(10 * e)) for e in (0, 49, 50, 99)]
    np.testing.assert_allclose(rates, [1e-3, 1e-3, 1e-4, 1e-4], rtol=1e-6)


def test_the_earlier_per_step_schedule_stays_available():
    config = _config(lr_schedule="step_inverse_sqrt")
    schedule = learning_rate_schedule(config, steps_per_epoch=5)
    rates = [float(schedule(step)) for step in (1, 100, 400)]
    np.testing.assert_allclose(rates, [1e-3, 1e-3, 5e-4], rtol=1e-6)


def test_released_defaults_resolve():
    config = _config()
    assert (config.loss_scaling, config.alpha, config.optimizer) == ("released", 1.0, "adamw")
    assert (config.epochs, config.batch_size, config.weight_decay) == (200, 2048, 0.1)
    assert config.lr_schedule == "epoch_inverse_sqrt" and config.decay_after_epoch == 20
    arch = config.architecture
    assert arch.cls_token and not arch.final_norm and arch.head_dropout == 0.25
    assert (arch.cls_stddev, arch.init) == (1.0, "pytorch")
    assert config.training_includes_empty_lists()  # every list, as the released code
    assert _config(model="mlp").training_includes_empty_lists()
    assert not _config(model="mlp", loss_scaling="paper").training_includes_empty_lists()
    assert _config(loss_scaling="paper").alpha == 0.25
    assert _config(architecture=ModelConfig(dropout=0.1)).architecture.head_dropout == 0.1


@pytest.mark.parametrize(
    "settings", [{"model": "rankformer", "alpha": 0.0}, {"model": "transformer"}]
)
def test_the_alpha_zero_model_is_the_encoder_alone(settings):
    config = _config(architecture=TINY, **settings)
    tf.keras.utils.set_random_seed(0)
    model = build_run_model(config, _manifest())
    names = [v.name for v in model.weights]
    assert not any("cls" in name for name in names), names
    outputs = model({"features": np.zeros((1, 4, 3), np.float32), "mask": np.ones((1, 4), bool)})
    assert set(outputs) == {"scores"}
    # The score head reads z_i alone: d inputs, not 2d.
    head = model.get_layer("ranker").get_layer("score_head")
    assert head.layers[0].kernel.shape == (3, 4)


def test_the_earlier_transformer_variant_keeps_cls():
    config = _config(model="transformer", architecture=ModelConfig(cls_token=True))
    model = build_run_model(config, _manifest())
    assert any("cls" in v.name for v in model.weights)


def test_pytorch_initialisation_bounds():
    # torch.nn.Linear draws weights and biases from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    tf.keras.utils.set_random_seed(0)
    model = build_run_model(_config(model="mlp"), _manifest(46))
    first = model.get_layer("ranker").get_layer("dense_0")
    bound = 1 / np.sqrt(46)
    for weight in (first.kernel.numpy(), first.bias.numpy()):
        assert np.abs(weight).max() <= bound
        assert np.abs(weight).max() > 0.9 * bound  # uniform over the whole range
    keras = build_run_model(
        _config(model="mlp", architecture=ModelConfig(init="keras")),
        _manifest(46),
    )
    np.testing.assert_array_equal(keras.get_layer("ranker").get_layer("dense_0").bias.numpy(), 0)


def _layer_weights(model, names):
    ranker = model.get_layer("ranker")
    return [[w.numpy() for w in ranker.get_layer(name).weights] for name in names]


@pytest.mark.parametrize(
    "model, names",
    [
        ("rankformer", ["encoder_0", "encoder_1", "encoder_2"]),
        ("transformer", ["encoder_0", "encoder_1", "encoder_2"]),
        ("context_aware", ["block_0", "block_1", "block_2"]),
    ],
)
def test_encoder_layers_start_as_copies_of_the_first(model, names):
    # torch.nn.TransformerEncoder deep-copies its layer (the released code), as allRank's clones.
    arch = dict(num_layers=3, ff_dim=8, head_hidden=4, num_heads=1, d_fc=4)
    tf.keras.utils.set_random_seed(0)
    copied = build_run_model(_config(model=model, architecture=ModelConfig(**arch)), _manifest())
    first, *others = _layer_weights(copied, names)
    assert len(first) >= 8  # attention, feed-forward and both LayerNorms
    for weights in others:
        for a, b in zip(first, weights):
            np.testing.assert_array_equal(a, b)
    tf.keras.utils.set_random_seed(0)
    own = ModelConfig(**arch, copied_layers=False)
    independent = build_run_model(_config(model=model, architecture=own), _manifest())
    first, second, _ = _layer_weights(independent, names)
    kernels = [(a, b) for a, b in zip(first, second) if a.ndim == 2]
    assert kernels and all(not np.array_equal(a, b) for a, b in kernels)
    # Copies at the start only: the layers' variables stay separate.
    assert len(copied.trainable_weights) == len(independent.trainable_weights)


def test_cls_token_is_drawn_from_a_standard_normal():
    tf.keras.utils.set_random_seed(0)
    config = _config(architecture=ModelConfig(num_layers=1, ff_dim=8, head_hidden=4))
    model = build_run_model(config, _manifest(200))
    cls = model.get_layer("ranker").get_layer("cls_token").cls.numpy()
    assert 0.8 < cls.std() < 1.2


def test_listnet_uses_the_labels_softmax_as_target():
    labels = np.array([[2.0, 0.0, 1.0, -1.0], [0.0, 0.0, 0.0, -1.0]], np.float32)
    scores = np.array([[1.0, 0.5, -1.0, 7.0], [0.2, 0.4, 0.1, 3.0]], np.float32)
    expected = []
    for y, s in zip(labels, scores):
        valid = y >= 0
        target = np.exp(y[valid]) / np.exp(y[valid]).sum()
        expected.append(-(target @ _log_softmax(s[valid])))
    # paper scaling: per-list sums averaged over every list (allRank's reduction);
    # an all-zero list has a uniform target and so a loss.
    loss = get_score_loss("listnet").build(2, "paper")(labels, scores)
    assert float(loss) == pytest.approx(np.mean(expected), rel=1e-5)
    assert expected[1] > 0


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="`loss_scaling` must be one of"):
        _config(loss_scaling="mean")
    with pytest.raises(ValueError, match="optimizer"):
        _config(optimizer="sgd")
    with pytest.raises(ValueError, match="adamw"):
        _config(optimizer="adam", weight_decay=0.1)
    with pytest.raises(ValueError, match="cls_token"):
        _config(model="rankformer", architecture=ModelConfig(cls_token=False))
    with pytest.raises(ValueError, match="keep_weights"):
        _config(keep_weights="first")


def test_context_aware_takes_allranks_configuration_for_its_loss():
    ndcg = _config(model="context_aware", loss="ndcg_loss2pp").architecture
    assert (ndcg.d_fc, ndcg.num_heads, ndcg.dropout, ndcg.init) == (128, 4, 0.3, "keras")
    ordinal = _config(model="context_aware", loss="ordinal").architecture
    assert (ordinal.d_fc, ordinal.num_heads, ordinal.dropout) == (144, 2, 0.4)
    given = ModelConfig(d_fc=64)
    assert (
        _config(model="context_aware", loss="ndcg_loss2pp", architecture=given).architecture.d_fc
        == 64
    )
