"""The fused CPU kernels (bias + GELU + dropout, dropout, layer norm) against TensorFlow's ops.

The kernel is compiled once into the user's cache (a few seconds); without a C++
compiler these tests are skipped, except the fallback's.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tfr_rankformer import fused_ops  # noqa: E402
from tfr_rankformer.layers import PreNormEncoderLayer, gelu  # noqa: E402

OP = "TfrBiasGeluDropout"
FUSED_OPS = {OP, "TfrDropout", "TfrLayerNorm"}


@pytest.fixture(scope="module")
def library():
    if shutil.which(os.environ.get("CXX") or "g++") is None:
        pytest.skip("no C++ compiler")
    library = fused_ops.load_library()
    assert library is not None, "the fused op did not build; see the logged warning"
    return library


def _inputs(rows, columns, seed=0, spread=2.0):
    rng = np.random.default_rng(seed)
    h = tf.constant((spread * rng.normal(size=(rows, columns))).astype(np.float32))
    bias = tf.constant(rng.normal(size=columns).astype(np.float32))
    upstream = tf.constant(rng.normal(size=(rows, columns)).astype(np.float32))
    return h, bias, upstream


def _gradients(function, h, bias, upstream):
    with tf.GradientTape() as tape:
        tape.watch([h, bias])
        y = function(h, bias)
    dh, dbias = tape.gradient(y, [h, bias], output_gradients=upstream)
    return y.numpy(), dh.numpy(), dbias.numpy()


def _fused(key, rate):
    return lambda h, bias: fused_ops.bias_gelu_dropout(h, bias, key, rate)


def _reference(h, bias):
    return gelu(h + bias)


def test_without_dropout_it_is_gelu_with_its_gradients(library):
    z = np.linspace(-6, 6, 8 * 1001, dtype=np.float32).reshape(8, 1001)
    bias = tf.constant(np.linspace(-0.5, 0.5, 1001, dtype=np.float32))
    h = tf.constant(z) - bias
    upstream = tf.constant(np.random.default_rng(1).normal(size=z.shape).astype(np.float32))
    ours = _gradients(_fused(7, 0.0), h, bias, upstream)
    theirs = _gradients(_reference, h, bias, upstream)
    # Within 1e-6 plus one float32 rounding step of the value (1.2e-7 relative).
    np.testing.assert_allclose(ours[0], theirs[0], atol=1e-6, rtol=1.2e-7)
    exact = np.vectorize(lambda v: v * 0.5 * (1 + math.erf(v / math.sqrt(2))))(
        (h + bias).numpy().astype(np.float64)
    )
    np.testing.assert_allclose(ours[0], exact, atol=5e-7, rtol=0)
    np.testing.assert_allclose(ours[1], theirs[1], atol=1e-5, rtol=0)
    np.testing.assert_allclose(ours[2], theirs[2], atol=1e-5, rtol=1e-5)


def test_dropout_rate_scaling_and_gradients(library):
    h, bias, upstream = _inputs(2048, 512)
    y, dh, dbias = _gradients(_fused(123, 0.25), h, bias, upstream)
    reference, reference_dh, _ = _gradients(_reference, h, bias, upstream)
    live = reference != 0  # gelu(z) underflows to 0 only for z far below 0
    assert live.mean() > 0.99
    dropped = live & (y == 0)
    kept = live & ~dropped
    assert abs(dropped.sum() / live.sum() - 0.25) < 0.01
    np.testing.assert_allclose(y[kept], reference[kept] / 0.75, rtol=2e-6, atol=2e-6)
    assert (dh[dropped] == 0).all()
    np.testing.assert_allclose(dh[kept], reference_dh[kept] / 0.75, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dbias, dh.astype(np.float64).sum(axis=0), rtol=1e-4, atol=1e-3)


def test_masks_follow_the_key(library):
    h, bias, _ = _inputs(300, 129)
    first = fused_ops.bias_gelu_dropout(h, bias, 5, 0.5).numpy()
    again = fused_ops.bias_gelu_dropout(h, bias, 5, 0.5).numpy()
    other = fused_ops.bias_gelu_dropout(h, bias, 6, 0.5).numpy()
    np.testing.assert_array_equal(first, again)
    assert ((first == 0) != (other == 0)).mean() > 0.4  # independent masks differ in half


def test_dropout_kernel_rate_scaling_gradient_and_key(library):
    x = tf.constant(np.random.default_rng(2).uniform(1, 2, size=(300, 17, 46)).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fused_ops.dropout(x, 9, 0.25)
    dx = tape.gradient(y, x, output_gradients=tf.ones_like(x)).numpy()
    y, x = y.numpy(), x.numpy()
    dropped = y == 0
    assert abs(dropped.mean() - 0.25) < 0.01
    np.testing.assert_allclose(y[~dropped], x[~dropped] / 0.75, rtol=1e-6)
    np.testing.assert_array_equal(dx == 0, dropped)  # the same mask
    np.testing.assert_allclose(dx[~dropped], 1 / 0.75, rtol=1e-6)
    np.testing.assert_array_equal(fused_ops.dropout(x, 9, 0.25).numpy(), y)
    assert ((fused_ops.dropout(x, 10, 0.25).numpy() == 0) != dropped).mean() > 0.3
    np.testing.assert_array_equal(fused_ops.dropout(x, 9, 0.0).numpy(), x)


def test_layer_norm_matches_keras(library):
    rng = np.random.default_rng(3)
    x = tf.constant((3 * rng.normal(size=(64, 17, 46)) + 1).astype(np.float32))
    keras = tf.keras.layers.LayerNormalization(epsilon=1e-5)
    keras.build(x.shape)
    keras.gamma.assign(rng.normal(size=46).astype(np.float32))
    keras.beta.assign(rng.normal(size=46).astype(np.float32))
    upstream = tf.constant(rng.normal(size=x.shape).astype(np.float32))

    def outputs(function):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = function()
        grads = tape.gradient(y, [x, keras.gamma, keras.beta], output_gradients=upstream)
        return [y.numpy()] + [g.numpy() for g in grads]

    ours = outputs(lambda: fused_ops.layer_norm(x, keras.gamma, keras.beta, 1e-5))
    theirs = outputs(lambda: keras(x))
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine, reference, rtol=1e-5, atol=2e-5)


_KERNELS_ON_THREADS = """
import sys
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[2]))
from tfr_rankformer import fused_ops
rng = np.random.default_rng(0)
h = tf.constant(rng.normal(size=(4099, 256)).astype(np.float32))
bias = tf.constant(rng.normal(size=256).astype(np.float32))
with tf.GradientTape() as tape:
    tape.watch([h, bias])
    y = fused_ops.bias_gelu_dropout(h, bias, 11, 0.25)
    z = fused_ops.layer_norm(fused_ops.dropout(h, 12, 0.25), bias, bias, 1e-5)
dh, dbias = tape.gradient([y, z], [h, bias])
np.savez(sys.argv[1], y=y.numpy(), z=z.numpy(), dh=dh.numpy(), dbias=dbias.numpy())
"""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_results_do_not_depend_on_the_thread_count(library, tmp_path):
    results = []
    for threads in (1, 2):
        out = tmp_path / f"threads_{threads}.npz"
        done = subprocess.run(
            [sys.executable, "-c", _KERNELS_ON_THREADS, str(out), str(threads)],
            capture_output=True,
            text=True,
            timeout=300,
            env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"),
        )
        assert done.returncode == 0, done.stderr[-2000:]
        results.append(np.load(out))
    for name in ("y", "z", "dh", "dbias"):
        np.testing.assert_array_equal(results[0][name], results[1][name], err_msg=name)


def _encoder(dropout, seed=1):
    tf.keras.utils.set_random_seed(seed)
    layer = PreNormEncoderLayer(num_heads=2, ff_dim=64, dropout=dropout)
    x = tf.random.stateless_normal([4, 5, 6], seed=[1, 2])
    mask = tf.constant([[True] * 5, [True] * 3 + [False] * 2] * 2)
    layer(x, mask, training=False)  # builds the weights
    return layer, x, mask


def _ops_of(layer, x, mask):
    graph = tf.function(lambda: layer(x, mask, training=True)).get_concrete_function().graph
    return {op.type for op in graph.get_operations()}


def test_encoder_uses_the_kernel_in_training_only(library, monkeypatch):
    monkeypatch.setenv(fused_ops.ENV_SWITCH, "1")
    layer, x, mask = _encoder(0.0)
    assert {OP, "TfrLayerNorm"} <= _ops_of(layer, x, mask)
    inference = tf.function(lambda: layer(x, mask, training=False)).get_concrete_function()
    assert not FUSED_OPS & {op.type for op in inference.graph.get_operations()}
    fused = layer(x, mask, training=True).numpy()
    monkeypatch.setenv(fused_ops.ENV_SWITCH, "0")
    plain = layer(x, mask, training=True).numpy()
    np.testing.assert_allclose(fused, plain, atol=1e-5)  # no dropout: the same function


def test_encoder_dropout_is_seeded_and_advances(library, monkeypatch):
    monkeypatch.setenv(fused_ops.ENV_SWITCH, "1")
    layer, x, mask = _encoder(0.25)
    assert FUSED_OPS <= _ops_of(layer, x, mask)
    first, second = (layer(x, mask, training=True).numpy() for _ in range(2))
    assert (first != second).any()
    twin, x, mask = _encoder(0.25)
    np.testing.assert_array_equal(twin(x, mask, training=True).numpy(), first)


def test_the_switch_and_a_failed_build_fall_back(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv(fused_ops.ENV_SWITCH, "0")
    assert not fused_ops.available()
    layer, x, mask = _encoder(0.25)
    assert not FUSED_OPS & _ops_of(layer, x, mask)
    assert np.isfinite(layer(x, mask, training=True).numpy()).all()

    monkeypatch.setenv(fused_ops.ENV_SWITCH, "1")
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv(fused_ops.CACHE_ENV, str(tmp_path / "cache"))
    fused_ops.load_library.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=fused_ops.__name__):
            assert not fused_ops.available()
            assert not fused_ops.available()
        assert len([r for r in caplog.records if "unavailable" in r.getMessage()]) == 1
        assert not FUSED_OPS & _ops_of(layer, x, mask)
    finally:
        fused_ops.load_library.cache_clear()
