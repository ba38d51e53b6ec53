"""The input pipeline's compiled quantile search: tf.searchsorted's indices, and so the
normalisation layer's output bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfr_rankformer.model.feature_normalization import FeatureNormalization  # noqa: E402
from tfr_rankformer.model.table_search import (  # noqa: E402
    pipeline_normalization,
    upper_bound,
)


def _table(rng, d: int, q: int) -> np.ndarray:
    """Non-decreasing rows with runs of equal knots (as count features give)."""
    table = np.sort(np.round(rng.lognormal(0.0, 1.5, size=(d, q)), 1), axis=1)
    table[0] = 0.0  # a constant feature
    return table.astype(np.float32)


def _values(rng, table: np.ndarray, n: int) -> np.ndarray:
    d, q = table.shape
    x = rng.lognormal(0.0, 2.0, size=(d, n)).astype(np.float32)
    on_knots = table[np.arange(d)[:, None], rng.integers(0, q, size=(d, n))]
    x = np.where(rng.random((d, n)) < 0.4, on_knots, x)
    x[:, :3] = [-1.0, 0.0, 1e30]  # below, on and above the table
    return x


@pytest.mark.parametrize("q, n", [(2, 5), (7, 300), (1000, 5000)])
def test_upper_bound_equals_searchsorted(q, n):
    rng = np.random.default_rng(q)
    table = _table(rng, 4, q)
    x = _values(rng, table, n)
    expected = tf.searchsorted(tf.constant(table), tf.constant(x), side="right").numpy()
    np.testing.assert_array_equal(upper_bound(tf.constant(table), tf.constant(x)).numpy(), expected)


def test_the_pipeline_transform_is_the_layer_bit_for_bit():
    rng = np.random.default_rng(0)
    table = _table(rng, 5, 50)
    layer = FeatureNormalization("quantile", num_features=5, quantiles=table.tolist())
    # [2, n, d] raw features, NaN included.
    x = _values(rng, table, 2 * 333).T.reshape(2, 333, 5).copy()
    x[0, 0, 1] = np.nan
    expected = layer(tf.constant(x)).numpy()
    got = pipeline_normalization(layer)(tf.constant(x)).numpy()
    np.testing.assert_array_equal(got, expected)
    # As the input pipeline runs it (in tf.data) and as a model runs the layer
    # (a traced function, which the graph optimiser rewrites).
    in_data = tf.data.Dataset.from_tensors(tf.constant(x)).map(pipeline_normalization(layer))
    np.testing.assert_array_equal(next(iter(in_data)).numpy(), expected)
    np.testing.assert_array_equal(tf.function(layer)(tf.constant(x)).numpy(), expected)
    assert np.isnan(got[0, 0, 1]) and np.isfinite(np.delete(got.ravel(), 1)).all()
    # Other methods and no layer pass through unchanged.
    standard = FeatureNormalization("standard", num_features=5, mean=[0.0] * 5, std=[1.0] * 5)
    assert pipeline_normalization(standard) is standard
    assert pipeline_normalization(None) is None
