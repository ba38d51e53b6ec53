"""Fused CPU kernels of the encoder's training step, compiled on first use.

``bias_gelu_dropout(h, bias, key, rate)`` computes ``gelu(h + bias)`` (exact
GELU) followed by inverted dropout in one pass over ``h`` instead of the
half-dozen TensorFlow kernels (and as many backward ones) that the Keras layers
issue; ``dropout(x, key, rate)`` is inverted dropout in one pass. Both draw their
masks from a hash of ``key`` and each element's position, and their gradients
recompute the mask rather than storing it. ``layer_norm(x, gamma, beta, epsilon)``
is Keras's LayerNormalization over the last axis in one pass (and one backward).

The C++ source ships in ``tfr_rankformer/ops/``; it is compiled with the
system's C++ compiler (``$CXX`` or ``g++``) against the installed TensorFlow
into ``$TFR_RANKFORMER_CACHE`` (default ``~/.cache/tfr_rankformer``), under
``ops/<hash of source, compiler, TensorFlow>/``, and loaded from there later.

The kernels run on CPU only. ``available()`` is False, and the encoder keeps its
plain TensorFlow ops, when ``TFR_RANKFORMER_FUSED_OPS=0``, when a GPU is visible,
or when the library cannot be built (one warning is logged).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import time

import tensorflow as tf

__all__ = [
    "ENV_SWITCH",
    "available",
    "bias_gelu_dropout",
    "dropout",
    "layer_norm",
    "load_library",
]

logger = logging.getLogger(__name__)

ENV_SWITCH = "TFR_RANKFORMER_FUSED_OPS"
CACHE_ENV = "TFR_RANKFORMER_CACHE"
_SOURCE = os.path.join(os.path.dirname(__file__), "ops", "fused_ops.cc")
_LIBRARY = "fused_ops.so"


def _cache_root() -> str:
    default = os.path.join(os.path.expanduser("~"), ".cache", "tfr_rankformer")
    return os.environ.get(CACHE_ENV) or default


def _command(compiler: str, source: str, output: str) -> list[str]:
    return [
        compiler,
        "-O3",
        "-ffp-contract=fast",
        "-fopenmp-simd",
        "-fPIC",
        "-shared",
        *tf.sysconfig.get_compile_flags(),
        source,
        "-o",
        output,
        *tf.sysconfig.get_link_flags(),
    ]


def _build(compiler: str) -> str:
    """Compiles the library unless cached; returns its path."""
    with open(_SOURCE, "rb") as f:
        source = f.read()
    key = hashlib.sha256(source)
    for part in (compiler, tf.__version__, *_command(compiler, "", "")):
        key.update(b"\0" + part.encode())
    directory = os.path.join(_cache_root(), "ops", key.hexdigest()[:16])
    path = os.path.join(directory, _LIBRARY)
    if os.path.isfile(path):
        return path
    os.makedirs(directory, exist_ok=True)
    # Compiled under a temporary name, then renamed: concurrent builds never see
    # a partial file, and the last rename wins with an identical library.
    handle, temporary = tempfile.mkstemp(suffix=".partial", dir=directory)
    os.close(handle)
    try:
        started = time.perf_counter()
        done = subprocess.run(
            _command(compiler, _SOURCE, temporary), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{compiler} failed:\n{done.stderr[-4000:]}")
        os.replace(temporary, path)
        logger.info("compiled %s in %.1f s", path, time.perf_counter() - started)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path


@functools.cache
def load_library():
    """The loaded op library, compiling it first if needed; ``None`` when that fails."""
    compiler = os.environ.get("CXX") or "g++"
    try:
        if shutil.which(compiler) is None:
            raise RuntimeError(f"no C++ compiler {compiler!r} on the PATH")
        return tf.load_op_library(_build(compiler))
    except (OSError, RuntimeError, tf.errors.OpError) as error:
        logger.warning("fused CPU ops unavailable, using plain TensorFlow ops: %s", error)
        return None


@functools.cache
def _no_gpu() -> bool:
    return not tf.config.list_physical_devices("GPU")


def available() -> bool:
    """Whether the fused kernels can be used (switch on, no GPU, library built)."""
    if os.environ.get(ENV_SWITCH, "1").strip().lower() in ("0", "false", "off", "no"):
        return False
    return _no_gpu() and load_library() is not None


def _library():
    library = load_library()
    if library is None:
        raise RuntimeError("the fused CPU ops could not be built; see the logged warning")
    return library


def bias_gelu_dropout(h, bias, key, rate: float):
    """``gelu(h + bias)`` with inverted dropout at ``rate``, one fused CPU kernel.

    Args:
      h: ``[N, M]`` float32, the hidden layer before its bias.
      bias: ``[M]`` float32.
      key: int64 scalar; the dropout mask is a hash of ``(key, row, column)``,
        so the same key gives the same mask on any number of threads.
      rate: fraction of elements zeroed, in [0, 1).

    Returns:
      ``[N, M]`` float32. Differentiable with respect to ``h`` and ``bias``.
    """
    return _library().tfr_bias_gelu_dropout(h, bias, tf.cast(key, tf.int64), rate=float(rate))


def dropout(x, key, rate: float):
    """Inverted dropout at ``rate`` in one CPU kernel.

    Args:
      x: float32 of any shape.
      key: int64 scalar; the mask is a hash of ``key`` and each element's
        position in the flattened ``x``.
      rate: fraction of elements zeroed, in [0, 1).

    Returns:
      ``x``'s shape, float32. Differentiable with respect to ``x``.
    """
    return _library().tfr_dropout(x, tf.cast(key, tf.int64), rate=float(rate))


def layer_norm(x, gamma, beta, epsilon: float):
    """Layer normalisation over the last axis, as ``tf.keras.layers.LayerNormalization``.

    Args:
      x: float32 ``[..., D]``.
      gamma: ``[D]`` float32 scale.
      beta: ``[D]`` float32 offset.
      epsilon: added to the (population) variance.

    Returns:
      ``x``'s shape, float32. Differentiable with respect to all three tensors.
    """
    return _library().tfr_layer_norm(x, gamma, beta, epsilon=float(epsilon))


@tf.RegisterGradient("TfrBiasGeluDropout")
def _bias_gelu_dropout_gradient(op, upstream):
    h, bias, key = op.inputs
    dh, dbias = _library().tfr_bias_gelu_dropout_grad(
        upstream, h, bias, key, rate=op.get_attr("rate")
    )
    return dh, dbias, None


@tf.RegisterGradient("TfrDropout")
def _dropout_gradient(op, upstream):
    # The same mask scales the gradient: dropout of the upstream with the same key.
    return _library().tfr_dropout(upstream, op.inputs[1], rate=op.get_attr("rate")), None


@tf.RegisterGradient("TfrLayerNorm")
def _layer_norm_gradient(op, upstream):
    x, gamma, _ = op.inputs
    return _library().tfr_layer_norm_grad(upstream, x, gamma, epsilon=op.get_attr("epsilon"))
