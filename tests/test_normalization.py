"""Streaming normalisation statistics against numpy on the whole data."""

from __future__ import annotations

import numpy as np
import pytest

from tfrecords_tools.normalization import NormalizationFitter, sample_keys, signed_log1p


def _data(n=5000, d=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.lognormal(size=(n, d)) * np.array([1, 100, 1e4, 1])
    x[:, 3] = -x[:, 3]  # negative values for the signed log
    return (x + 1e6 * np.array([0, 0, 1, 0])).astype(np.float32)  # a large offset too


def _fit(x, blocks, sample_size=100_000, stale=False):
    fitter = NormalizationFitter(x.shape[1], seed=3, sample_size=sample_size, num_quantiles=11)
    positions = np.arange(1, len(x) + 1)
    parts = np.array_split(np.arange(len(x)), blocks)
    pending = []
    for idx in parts:
        pending.append(fitter.partial(x[idx], positions[idx]))
        # With stale thresholds, partials are computed before earlier ones merge.
        if not stale or len(pending) == 3:
            for part in pending:
                fitter.merge(part)
            pending = []
    for part in pending:
        fitter.merge(part)
    return fitter.result("quantile")


def test_moments_and_extremes_are_exact():
    x = _data()
    stats = _fit(x, blocks=7)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(stats["standard"]["mean"], x64.mean(0), rtol=1e-7)
    np.testing.assert_allclose(stats["standard"]["std"], x64.std(0), rtol=1e-6)
    logged = signed_log1p(x).astype(np.float64)
    np.testing.assert_allclose(stats["log1p"]["mean"], logged.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats["log1p"]["std"], logged.std(0), rtol=1e-5)
    np.testing.assert_allclose(stats["min"], x.min(0), rtol=1e-7)
    np.testing.assert_allclose(stats["max"], x.max(0), rtol=1e-7)
    assert stats["num_items"] == len(x)


def test_quantiles_equal_numpy_when_everything_is_sampled():
    x = _data(n=3000)
    stats = _fit(x, blocks=5)
    expected = np.quantile(x.astype(np.float64), np.linspace(0, 1, 11), axis=0).T
    np.testing.assert_allclose(stats["quantile"]["values"], expected, rtol=1e-7)
    assert stats["quantile"]["sample_size"] == 3000


def test_sample_does_not_depend_on_blocks_or_stale_thresholds():
    x = _data(n=6000)
    one = _fit(x, blocks=1, sample_size=500)
    many = _fit(x, blocks=23, sample_size=500)
    stale = _fit(x, blocks=23, sample_size=500, stale=True)
    assert one["quantile"]["values"] == many["quantile"]["values"] == stale["quantile"]["values"]
    assert one["quantile"]["sample_size"] == 500


def test_sample_is_roughly_uniform():
    # With a sample of 10% the sampled median tracks the true median.
    x = _data(n=20_000)
    stats = _fit(x, blocks=9, sample_size=2000)
    true_median = np.median(x, axis=0)
    sampled_median = np.array(stats["quantile"]["values"])[:, 5]
    np.testing.assert_allclose(sampled_median, true_median, rtol=0.1)


def test_keys_are_uniform_and_distinct():
    keys = sample_keys(11, np.arange(1, 100_001))
    assert len(np.unique(keys)) == len(keys)
    assert 0.0 <= keys.min() and keys.max() < 1.0
    counts = np.histogram(keys, bins=10, range=(0, 1))[0]
    assert np.all(np.abs(counts - 10_000) < 500)


def test_unknown_method_is_rejected():
    fitter = NormalizationFitter(2, seed=0)
    with pytest.raises(ValueError, match="Unknown normalisation"):
        fitter.result("zscore")
