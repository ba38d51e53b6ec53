"""The in-graph normalisation layer against scikit-learn, numpy and the project's fitter."""

from __future__ import annotations

import functools
import json
from statistics import NormalDist

import numpy as np
import pytest
import tensorflow as tf
from sklearn.preprocessing import QuantileTransformer

from tfr_rankformer.model.feature_normalization import (
    METHODS,
    OUTPUT_BOUND,
    FeatureNormalization,
    run_starts,
)
from tfrecords_tools.normalization import NORMALIZATIONS, NormalizationFitter, signed_log1p

NUM_QUANTILES = 101
D = 6
# Columns of _features: 3 has many zeros inside its range (a run of equal
# quantiles), 4 has zeros at its minimum, 5 is constant.
INTERIOR_TIES, MINIMUM_TIES, CONSTANT = 3, 4, 5


def _features(n: int, seed: int = 0) -> np.ndarray:
    """``[n, 6]`` float32-representable float64 features with heavy tails, ties and a constant."""
    rng = np.random.default_rng(seed)
    x = np.stack(
        [
            rng.normal(size=n) * 3 + 10,
            rng.standard_cauchy(size=n) * 100,
            rng.lognormal(sigma=2.0, size=n) * 1e4,
            np.where(rng.random(n) < 0.4, 0.0, rng.laplace(loc=1.0, size=n)),
            np.where(rng.random(n) < 0.6, 0.0, rng.lognormal(size=n)),
            np.full(n, 3.5),
        ],
        axis=1,
    )
    return x.astype(np.float32).astype(np.float64)


def _quantile_table(x: np.ndarray) -> np.ndarray:
    """``[d, Q]``: what the converter's manifest stores."""
    return np.quantile(x, np.linspace(0, 1, NUM_QUANTILES), axis=0).T


def _apply(layer, x: np.ndarray) -> np.ndarray:
    """The layer on ``[n, d]`` rows, fed as one ``[1, n, d]`` list."""
    return layer(tf.constant(x[None], tf.float32)).numpy()[0]


@functools.cache
def _fit(sign: float):
    """Training rows, sklearn's transformer fitted on all of them, and the quantile table.

    ``sign=-1`` mirrors the data, moving the ties to the upper half and the maximum.
    """
    x = sign * _features(3000)
    sklearn = QuantileTransformer(
        n_quantiles=NUM_QUANTILES, output_distribution="normal", subsample=len(x)
    ).fit(x)
    return x, sklearn, _quantile_table(x)


@pytest.fixture
def fitted():
    return _fit(1.0)


def _new_rows(x: np.ndarray, table: np.ndarray, seed: int = 1) -> np.ndarray:
    """Unseen rows: wide random values, beyond both ends, on and just off the quantiles."""
    rng = np.random.default_rng(seed)
    rows = [
        rng.normal(size=(200, D)) * np.abs(x).max(axis=0) * 0.3,
        x.min(axis=0, keepdims=True) - 1.0,
        x.max(axis=0, keepdims=True) + 1.0,
        x.min(axis=0, keepdims=True) + 1e-3,
        x.max(axis=0, keepdims=True) - 1e-3,
        table.T[[1, 37, 50, 99]],
        table.T[[20, 80]] * (1 + 1e-6),
        np.zeros((1, D)),
    ]
    return np.concatenate(rows).astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_quantile_table_is_what_sklearn_fits(sign):
    x, sklearn, table = _fit(sign)
    np.testing.assert_allclose(sklearn.quantiles_.T, table, rtol=1e-12, atol=1e-12)
    # The data exercise the tie handling: a run of equal quantiles inside the range.
    ties = np.diff(table[INTERIOR_TIES]) == 0
    assert ties.any() and not ties[0] and not ties[-1]


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("rows", ["train", "new"])
def test_quantile_matches_sklearn(rows, sign):
    x, sklearn, table = _fit(sign)
    data = x if rows == "train" else _new_rows(x, table)
    layer = FeatureNormalization("quantile", num_features=D, quantiles=table)

    expected = sklearn.transform(data)
    np.testing.assert_allclose(_apply(layer, data), expected, rtol=0, atol=1e-5)
    # XLA's own ndtri is 0.03 off in the tails; the layer must not be.
    compiled = tf.function(layer, jit_compile=True)(tf.constant(data[None], tf.float32))
    np.testing.assert_allclose(compiled.numpy()[0], expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_quantile_ties_and_extremes_follow_sklearn(sign):
    x, sklearn, table = _fit(sign)
    layer = FeatureNormalization("quantile", num_features=D, quantiles=table)
    zeros = np.zeros((1, D))
    out = _apply(layer, zeros)[0]
    expected = sklearn.transform(zeros)[0]
    # Interior zeros take the middle of their run of levels (about 0.11 to 0.51,
    # or 0.49 to 0.89 mirrored).
    run = np.flatnonzero(table[INTERIOR_TIES] == 0)
    middle = NormalDist().inv_cdf((run[0] + run[-1]) / 2 / (NUM_QUANTILES - 1))
    assert len(run) > 10 and sign * middle < -0.3
    assert out[INTERIOR_TIES] == pytest.approx(middle, abs=1e-4)
    assert out[INTERIOR_TIES] == pytest.approx(expected[INTERIOR_TIES], abs=1e-4)
    # At the minimum (maximum), sklearn's bound check wins over the tie average:
    # zeros map to the lower (upper) clip.
    assert out[MINIMUM_TIES] == pytest.approx(expected[MINIMUM_TIES], abs=1e-4)
    assert sign * out[MINIMUM_TIES] < -5.19
    constant = _apply(layer, x[:5])[:, CONSTANT]
    np.testing.assert_allclose(constant, sklearn.transform(x[:5])[:, CONSTANT], atol=1e-4)
    # NaN passes through, as in sklearn.
    nan_row = np.full((1, D), np.nan)
    assert np.isnan(_apply(layer, nan_row)).all()


@pytest.mark.parametrize("method", ["standard", "log1p"])
def test_moments_match_numpy(method):
    x = _features(500)
    transformed = signed_log1p(x) if method == "log1p" else x
    mean, std = transformed.mean(axis=0), transformed.std(axis=0)
    # The constant column's std is rounding noise (1e-14 for log1p), or 0.
    assert std[CONSTANT] < 1e-12
    layer = FeatureNormalization(method, num_features=D, mean=mean, std=std)

    out = _apply(layer, x)
    expected = (transformed - mean) / np.where(std < 1e-12, 1, std)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(out[:, CONSTANT], 0.0)


def test_std_below_float32_resolution_counts_as_constant():
    # A constant 0.1 whose fitted moments carry float rounding: a float32 x - mean
    # of one ulp divided by the std would be -7 instead of 0.
    layer = FeatureNormalization("standard", num_features=1, mean=[0.1 + 1e-8], std=[1e-9])
    out = layer(tf.fill([2, 3, 1], 0.1)).numpy()
    np.testing.assert_allclose(out, 0.0, atol=1e-6)


def test_none_is_identity():
    x = _features(20)
    layer = FeatureNormalization("none", num_features=D)
    np.testing.assert_array_equal(_apply(layer, x), x.astype(np.float32))


@pytest.mark.parametrize("method", ["none", "standard", "log1p", "quantile"])
def test_finite_extremes_stay_finite_through_a_model(method):
    # Raw values near float32's limit: clipped (none, standard), compressed
    # (log1p, quantile), and never NaN out of the encoder and heads.
    from tfr_rankformer.model.model_config import ModelConfig
    from tfr_rankformer.model.models import build_model

    huge = np.float32(1.7e38)
    x = np.array([[[0.0, huge, huge], [-huge, 1.0, 0.0]]], np.float32)
    manifest = _manifest(_features(50)[:, :3], method)
    layer = FeatureNormalization.from_manifest(manifest)
    normal = layer(tf.constant(x)).numpy()
    assert np.isfinite(normal).all() and np.abs(normal).max() <= OUTPUT_BOUND
    if method in ("none", "standard"):
        assert normal[0, 0, 1] == OUTPUT_BOUND and normal[0, 1, 0] == -OUTPUT_BOUND
    tf.keras.utils.set_random_seed(0)
    config = ModelConfig(num_layers=1, ff_dim=16, head_hidden=8)
    model = build_model("rankformer", manifest, config, 2)
    outputs = model({"features": tf.constant(x), "mask": tf.ones([1, 2], tf.bool)})
    assert np.isfinite(outputs["scores"].numpy()).all()
    assert np.isfinite(outputs["list_quality"].numpy()).all()


def _manifest(x: np.ndarray, method: str = "quantile") -> dict:
    fitter = NormalizationFitter(
        x.shape[1], seed=0, sample_size=10_000, num_quantiles=NUM_QUANTILES
    )
    fitter.merge(fitter.partial(x, np.arange(1, len(x) + 1)))
    return {
        "num_features": x.shape[1],
        "normalization": json.loads(json.dumps(fitter.result(method))),
    }


def test_from_manifest_gives_standard_normal_marginals():
    rng = np.random.default_rng(2)
    x = np.stack(
        [
            rng.lognormal(sigma=1.5, size=4000),
            rng.standard_t(2, size=4000) * 50 + 7,
            rng.random(4000),
        ],
        axis=1,
    )
    layer = FeatureNormalization.from_manifest(_manifest(x))
    assert layer.method == "quantile"

    out = _apply(layer, x)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=0.05)
    np.testing.assert_allclose(out.std(axis=0), 1.0, atol=0.1)
    # Central quantiles of a standard normal: -1.2816, 0, 1.2816.
    np.testing.assert_allclose(
        np.quantile(out, [0.1, 0.5, 0.9], axis=0).T, [[-1.2816, 0, 1.2816]] * 3, atol=0.05
    )


@pytest.mark.parametrize("method", ["standard", "log1p", "none"])
def test_from_manifest_method_override_uses_its_statistics(method):
    x = _features(300)
    manifest = _manifest(x, method="quantile")
    layer = FeatureNormalization.from_manifest(manifest, method=method)
    assert layer.method == method and layer.quantiles is None

    transformed = signed_log1p(x) if method == "log1p" else x
    if method == "none":
        expected = x
    else:
        stats = manifest["normalization"][method]
        std = np.asarray(stats["std"])
        expected = (transformed - stats["mean"]) / np.where(std == 0, 1, std)
    np.testing.assert_allclose(_apply(layer, x), expected, rtol=1e-4, atol=1e-4)


def test_methods_are_the_fitters():
    assert set(METHODS) == set(NORMALIZATIONS)


@pytest.mark.parametrize("bad", ["minmax", "Quantile", ""])
def test_unknown_method_raises(bad):
    with pytest.raises(ValueError, match="choose from"):
        FeatureNormalization(bad, num_features=D)
    with pytest.raises(ValueError, match="choose from"):
        FeatureNormalization.from_manifest(_manifest(_features(50)), method=bad)


def test_bad_statistics_and_width_raise(fitted):
    _, _, table = fitted
    with pytest.raises(ValueError, match="`mean`"):
        FeatureNormalization("standard", num_features=D, mean=[0.0] * (D - 1), std=[1.0] * D)
    with pytest.raises(ValueError, match="`quantiles`"):
        FeatureNormalization("quantile", num_features=D)
    with pytest.raises(ValueError, match="lacks 'log1p'"):
        FeatureNormalization.from_manifest(
            {"num_features": D, "normalization": {"method": "log1p"}}
        )
    layer = FeatureNormalization("quantile", num_features=D, quantiles=table)
    with pytest.raises(ValueError, match="expects 6 features"):
        layer(tf.zeros([2, 3, D + 1]))


def _layers(table: np.ndarray) -> list[FeatureNormalization]:
    return [
        FeatureNormalization("quantile", num_features=D, quantiles=table),
        FeatureNormalization("standard", num_features=D, mean=np.ones(D), std=np.arange(D)),
        FeatureNormalization("log1p", num_features=D, mean=np.zeros(D), std=np.full(D, 2.0)),
        FeatureNormalization("none", num_features=D),
    ]


def test_unknown_batch_and_list_sizes_in_tf_function(fitted):
    x, _, table = fitted
    layer = FeatureNormalization("quantile", num_features=D, quantiles=table)
    spec = tf.TensorSpec([None, None, D], tf.float32)
    function = tf.function(layer, input_signature=[spec])
    assert function.get_concrete_function().structured_outputs.shape.as_list() == [None, None, D]

    flat = _apply(layer, x[:60])
    for batch, size in [(2, 3), (4, 15), (1, 60)]:
        batched = x[: batch * size].reshape(batch, size, D).astype(np.float32)
        out = function(tf.constant(batched)).numpy()
        np.testing.assert_allclose(out.reshape(-1, D), flat[: batch * size], rtol=0, atol=1e-6)


def test_config_round_trips_through_json(fitted):
    x, _, table = fitted
    for layer in _layers(table):
        config = json.loads(json.dumps(layer.get_config()))
        restored = FeatureNormalization.from_config(config)
        assert restored.get_config() == layer.get_config()
        np.testing.assert_array_equal(_apply(restored, x[:50]), _apply(layer, x[:50]))


def _model(layer: FeatureNormalization) -> tf.keras.Model:
    features = tf.keras.Input(shape=(None, D), name="features")  # [batch, list, d]
    normalized = layer(features)
    scores = tf.keras.layers.Dense(1, name="scores")(normalized)  # [batch, list, 1]
    # Keys are the layer names: the serving signature names outputs by layer.
    return tf.keras.Model(features, {layer.name: normalized, "scores": scores})


@pytest.mark.parametrize("method", ["quantile", "standard", "log1p", "none"])
def test_saved_models_reload_with_identical_outputs(fitted, tmp_path, method):
    x, _, table = fitted
    layer = next(layer for layer in _layers(table) if layer.method == method)
    model = _model(layer)
    batch = tf.constant(_new_rows(x, table)[:48].reshape(4, 12, D), tf.float32)
    expected = model(batch)

    tf.keras.models.save_model(model, str(tmp_path / "keras_saved_model"))
    model.save(str(tmp_path / "model.keras"))
    tf.saved_model.save(model, str(tmp_path / "saved_model"))
    reloaded = [
        tf.keras.models.load_model(str(tmp_path / "keras_saved_model")),
        tf.keras.models.load_model(str(tmp_path / "model.keras")),
    ]
    for other in reloaded:
        assert isinstance(other.layers[1], FeatureNormalization)
        for name in expected:
            np.testing.assert_array_equal(other(batch)[name].numpy(), expected[name].numpy())
    serving = tf.saved_model.load(str(tmp_path / "saved_model")).signatures["serving_default"]
    served = serving(features=batch)
    assert sorted(served) == sorted(expected)
    # The graph optimiser of a traced or served function rounds the layer's
    # output as eager code does (no division by a constant for it to rewrite),
    # so the training pipeline's normalised inputs are what serving computes.
    traced = tf.function(model)(batch)
    in_data = next(iter(tf.data.Dataset.from_tensors(batch).map(layer)))
    np.testing.assert_array_equal(in_data.numpy(), expected[layer.name].numpy())
    for name in expected:
        np.testing.assert_array_equal(served[name].numpy(), expected[name].numpy())
        np.testing.assert_array_equal(traced[name].numpy(), expected[name].numpy())


def test_run_starts_name_the_first_of_each_run_of_equal_quantiles():
    table = np.array([[0.0, 1.0, 1.0, 1.0, 2.0], [5.0, 5.0, 6.0, 7.0, 7.0]])
    np.testing.assert_array_equal(run_starts(table), [[0, 1, 1, 1, 4], [0, 0, 2, 3, 3]])
