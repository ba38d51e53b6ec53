"""In-graph feature normalisation from the manifest's statistics, so exports take raw
features: ``none``, ``standard``, ``log1p`` (standard on the signed log) or ``quantile``
(scikit-learn's ``QuantileTransformer(output_distribution="normal")``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import tensorflow as tf

from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.model.serializable import serializable
from tfr_rankformer.model.table_search import row_chunked_search

# The same names as `tfrecords_tools.normalization.NORMALIZATIONS` (the fitter).
METHODS = ("quantile", "log1p", "standard", "none")

# scikit-learn's `BOUNDS_THRESHOLD`: inputs this close to the ends map to u = 0 or 1.
BOUNDS_THRESHOLD = 1e-7
OUTPUT_BOUND = 1e9
_TAIL = np.float32(BOUNDS_THRESHOLD - np.spacing(1))

# P. J. Acklam's rational approximation of ndtri below p = 0.02425, in t = sqrt(-2 log p).
_ACKLAM_SPLIT = 0.02425
_ACKLAM_NUMERATOR = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_ACKLAM_DENOMINATOR = (
    7.784695709041462e-03,
    3.224671290700398e-01,
    2.445134137142996e00,
    3.754408661907416e00,
    1.0,
)


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"Unknown normalisation method {method!r}; choose from {sorted(METHODS)}")


def _vector(values, name: str, num_features: int) -> tuple[float, ...]:
    """``values`` as a tuple of ``num_features`` finite floats (untracked by Keras)."""
    if values is None:
        raise ValueError(f"`{name}` is required for this normalisation method")
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (num_features,) or not np.all(np.isfinite(array)):
        raise ValueError(
            f"`{name}` must hold {num_features} finite floats, got shape {array.shape}"
        )
    return tuple(float(v) for v in array)


def _table(values, num_features: int) -> tuple[tuple[float, ...], ...]:
    """The ``[d, Q]`` quantile table as nested tuples of finite floats."""
    if values is None:
        raise ValueError("`quantiles` is required for the quantile normalisation")
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != num_features or array.shape[1] < 2:
        raise ValueError(
            f"`quantiles` must have shape [{num_features}, Q] with Q >= 2, got {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        raise ValueError("`quantiles` must be finite")
    return tuple(tuple(float(v) for v in row) for row in array)


def _safe_scale(mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """``std`` as float32, with 1 where it is 0 or too small to divide float32 differences."""
    mean32, std32 = np.float32(mean), np.float32(std)
    # x - mean in float32 is rounded at ~eps * |mean|: a smaller std would blow that up.
    constant = std32 <= 10 * np.finfo(np.float32).eps * np.abs(mean32)
    return np.where(constant, np.float32(1), std32).astype(np.float32)


def _ndtri(p: tf.Tensor) -> tf.Tensor:
    """``ndtri(p)`` for float32 ``p`` in ``(0, 0.5]``; Acklam's tail keeps XLA's accuracy."""
    t = tf.sqrt(-2.0 * tf.math.log(tf.minimum(p, _ACKLAM_SPLIT)))
    tail = tf.math.polyval(list(_ACKLAM_NUMERATOR), t) / tf.math.polyval(
        list(_ACKLAM_DENOMINATOR), t
    )
    return tf.where(p < _ACKLAM_SPLIT, tail, tf.math.ndtri(p))


def run_starts(table: np.ndarray) -> np.ndarray:
    """``[d, Q]`` int32: for each quantile, the index of the first one equal to it.

    >>> run_starts(np.array([[0.0, 1.0, 1.0, 1.0, 2.0]])).tolist()
    [[0, 1, 1, 1, 4]]
    """
    index = np.broadcast_to(np.arange(table.shape[-1]), table.shape)
    new_run = np.concatenate([np.ones_like(table[:, :1], bool), np.diff(table) != 0], axis=1)
    return np.maximum.accumulate(np.where(new_run, index, 0), axis=1).astype(np.int32)


def _levels(x: tf.Tensor, table: tf.Tensor, starts: tf.Tensor, search):
    """scikit-learn's ``u`` (the mean of ``np.interp`` on the table and its mirror) and
    ``1 - u`` from the other end, both in float32 precision, for ``[d, n]`` values."""
    last = float(table.shape[-1] - 1)
    # Multiplied by reciprocals: the graph optimiser turns a division by a constant into
    # that in traced functions only, which would round training and serving apart.
    per_level, per_two_levels = np.float32(1.0) / np.float32([last, 2.0 * last])
    # The last knot <= x serves both interpolations; on a run of knots equal to x,
    # sklearn's mean of the two is the run's middle.
    upper = search(table, x)  # [d, n]
    low = tf.clip_by_value(upper - 1, 0, table.shape[-1] - 2)
    below = tf.gather(table, low, batch_dims=1)  # [d, Q] -> [d, n]
    above = tf.gather(table, low + 1, batch_dims=1)
    width = above - below
    fraction = tf.math.divide_no_nan(x - below, width)
    rest = tf.math.divide_no_nan(above - x, width)
    level = tf.cast(low, tf.float32)
    on_knot = tf.equal(x, below)
    # On a run table[start..low] of knots equal to x: levels start and low.
    start = tf.cast(tf.gather(starts, low, batch_dims=1), tf.float32)
    u = tf.where(on_knot, (start + level) * per_two_levels, (level + fraction) * per_level)
    complement = tf.where(
        on_knot,
        ((last - start) + (last - level)) * per_two_levels,
        ((last - 1.0 - level) + rest) * per_level,
    )
    return u, complement


def quantile_to_normal(x: tf.Tensor, table: tf.Tensor, starts: tf.Tensor, search):
    """The quantile transform of ``[d, n]`` values with ``[d, Q]`` quantiles at
    ``linspace(0, 1, Q)``, their ``run_starts`` and a ``searchsorted(side="right")``."""
    u, complement = _levels(x, table, starts, search)
    # As sklearn: u = 0 or 1 near the ends, the lower end winning for a constant feature.
    at_top = x - table[:, -1:] > -BOUNDS_THRESHOLD  # [d, n] vs [d, 1]
    at_bottom = x - table[:, :1] < BOUNDS_THRESHOLD
    u = tf.where(at_bottom, 0.0, tf.where(at_top, 1.0, u))
    complement = tf.where(at_bottom, 1.0, tf.where(at_top, 0.0, complement))
    # ndtri on the smaller of u and 1 - u keeps both tails accurate in float32.
    lower_tail = _ndtri(tf.maximum(tf.minimum(u, complement), _TAIL))
    z = tf.where(u <= complement, lower_tail, -lower_tail)
    return tf.where(tf.math.is_nan(x), x, z)


@serializable
class FeatureNormalization(tf.keras.layers.Layer):
    """Normalises ``[..., d]`` raw features with ``mean`` and ``std`` (``[d]``) or
    ``quantiles`` (``[d, Q]``), numbers in the config; float32 under any policy."""

    def __init__(
        self,
        method: str,
        *,
        num_features: int,
        mean=None,
        std=None,
        quantiles=None,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        _check_method(method)
        integer = isinstance(num_features, (int, np.integer)) and not isinstance(num_features, bool)
        if not integer or num_features < 1:
            raise ValueError(f"`num_features` must be a positive int, got {num_features!r}")
        self.method = method
        self.num_features = int(num_features)
        moments = method in ("standard", "log1p")
        self.mean = _vector(mean, "mean", self.num_features) if moments else None
        self.std = _vector(std, "std", self.num_features) if moments else None
        self.quantiles = _table(quantiles, self.num_features) if method == "quantile" else None
        if moments:  # a multiplication, not a division: see `_levels`
            self._offset = np.float32(self.mean)
            self._inverse_scale = np.float32(1) / _safe_scale(self.mean, self.std)
        if method == "quantile":
            # Non-decreasing, as sklearn makes them (searchsorted needs it).
            self._table = np.maximum.accumulate(np.float32(self.quantiles), axis=1)
            self._starts = run_starts(self._table)

    @classmethod
    def from_manifest(cls, manifest: Manifest | Mapping, method: str | None = None, **kwargs):
        """The layer of ``method`` (``None``: the manifest's) from a manifest's statistics."""
        manifest = Manifest.coerce(manifest)
        try:
            stats, num_features = manifest.normalization, manifest.num_features
            for key, value in (("normalization", stats), ("num_features", num_features)):
                if value is None:
                    raise KeyError(key)
            method = stats["method"] if method is None else method
            _check_method(method)
            if method in ("standard", "log1p"):
                moments = stats[method]
                kwargs.update(mean=moments["mean"], std=moments["std"])
            elif method == "quantile":
                kwargs.update(quantiles=_manifest_quantiles(stats["quantile"]))
        except KeyError as missing:
            raise ValueError(f"The manifest lacks {missing.args[0]!r} for {method!r}") from None
        return cls(method, num_features=num_features, **kwargs)

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.num_features:
            raise ValueError(
                f"FeatureNormalization expects {self.num_features} features, "
                f"got input shape {tuple(input_shape)}"
            )
        super().build(input_shape)

    def call(self, features: tf.Tensor) -> tf.Tensor:
        return self.transform(features)

    def transform(self, features: tf.Tensor, *, search=None) -> tf.Tensor:
        """The layer's output; ``search`` as ``quantile_to_normal``'s."""
        if self.method == "none":
            return tf.clip_by_value(features, -OUTPUT_BOUND, OUTPUT_BOUND)
        if self.method == "standard":
            normal = (features - self._offset) * self._inverse_scale
            return tf.clip_by_value(normal, -OUTPUT_BOUND, OUTPUT_BOUND)
        if self.method == "log1p":
            signed_log = tf.sign(features) * tf.math.log1p(tf.abs(features))
            return (signed_log - self._offset) * self._inverse_scale
        # [..., d] -> [n, d] -> [d, n]: one row per feature for the batched searchsorted.
        rows = tf.transpose(tf.reshape(features, [-1, self.num_features]))
        table, starts = tf.constant(self._table), tf.constant(self._starts)
        search = search or row_chunked_search(self._table)
        normal = quantile_to_normal(rows, table, starts, search)
        # [d, n] -> [n, d] -> [..., d]
        outputs = tf.reshape(tf.transpose(normal), tf.shape(features))
        outputs.set_shape(features.shape)
        return outputs

    def compute_output_shape(self, input_shape):
        return input_shape


def _manifest_quantiles(section: dict) -> list:
    """The ``[d, Q]`` values of the manifest's ``quantile`` section, checked."""
    distribution = section.get("output_distribution", "normal")
    if distribution != "normal":
        raise ValueError(f"Only a normal output distribution is supported, got {distribution!r}")
    levels = section.get("levels", "linspace(0, 1, num_quantiles)")
    if levels != "linspace(0, 1, num_quantiles)":
        raise ValueError(f"Quantile levels must be 'linspace(0, 1, num_quantiles)', got {levels!r}")
    return section["values"]
