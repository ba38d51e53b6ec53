"""Normalisation statistics fitted on train in bounded memory: exact moments (Chan et al.'s
merge) and quantiles from a bottom-k sample keyed by the seed and item position."""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

NORMALIZATIONS = ("quantile", "log1p", "standard", "none")


def signed_log1p(x: np.ndarray) -> np.ndarray:
    """``sign(x) * log1p(|x|)``: log scaling that keeps the sign of negative values."""
    return np.copysign(np.log1p(np.abs(x)), x)


def sample_keys(seed: int, positions: np.ndarray) -> np.ndarray:
    """Uniform keys in ``[0, 1)`` hashed from ``seed`` and item positions (SplitMix64)."""
    with np.errstate(over="ignore"):
        z = np.asarray(positions, dtype=np.uint64) + np.uint64(
            (seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        )
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@dataclasses.dataclass
class _Moments:
    """Count, mean and sum of squared deviations per column."""

    count: int
    mean: np.ndarray
    m2: np.ndarray

    @classmethod
    def of(cls, x: np.ndarray) -> _Moments:
        x = np.asarray(x, dtype=np.float64)
        mean = x.mean(axis=0)
        centred = x - mean
        return cls(x.shape[0], mean, np.einsum("ij,ij->j", centred, centred))

    def merge(self, other: _Moments) -> _Moments:
        if not other.count:
            return self
        if not self.count:
            return other
        total = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / total)
        m2 = self.m2 + other.m2 + delta**2 * (self.count * other.count / total)
        return _Moments(total, mean, m2)

    def std(self) -> np.ndarray:
        return np.sqrt(self.m2 / max(self.count, 1))


@dataclasses.dataclass
class FitPartial:
    """One block's moments, extremes and quantile-sample candidates."""

    raw: _Moments
    log: _Moments
    minimum: np.ndarray
    maximum: np.ndarray
    keys: np.ndarray
    rows: np.ndarray

    @classmethod
    def of(
        cls, features: np.ndarray, positions: np.ndarray, *, seed: int, threshold: float = 1.0
    ) -> FitPartial:
        """Summarises ``[n, d]`` raw features of items at ``positions`` (line numbers);
        only rows whose key is at most ``threshold`` are kept as sample candidates."""
        x = np.asarray(features, dtype=np.float32)
        keys = sample_keys(seed, positions)
        keep = keys <= threshold
        return cls(
            raw=_Moments.of(x),
            log=_Moments.of(signed_log1p(x)),
            minimum=x.min(axis=0).astype(np.float64),
            maximum=x.max(axis=0).astype(np.float64),
            keys=keys[keep],
            rows=x[keep],
        )


def _sorted_quantiles(sample: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """``[d, q]`` linearly interpolated quantiles of ``[n, d]`` (numpy's default method),
    columns sorted in a few threads (numpy releases the GIL while sorting)."""
    n, d = sample.shape
    position = levels * (n - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, n - 1)
    fraction = position - low

    def columns(bounds: tuple[int, int]) -> np.ndarray:
        ordered = np.sort(np.ascontiguousarray(sample[:, bounds[0] : bounds[1]].T), axis=1)
        below = ordered[:, low].astype(np.float64)
        return below + (ordered[:, high].astype(np.float64) - below) * fraction

    edges = np.linspace(0, d, min(d, 4) + 1).astype(int)
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as threads:
        parts = list(threads.map(columns, zip(edges[:-1], edges[1:])))
    return np.concatenate(parts)


def rounded(values: np.ndarray) -> list[float]:
    """Values as a flat list of floats for JSON."""
    # 9 significant digits round-trip float32, the precision of the features.
    return [float(f"{v:.9g}") for v in np.asarray(values, dtype=np.float64).ravel()]


class NormalizationFitter:
    """Merges :class:`FitPartial` results, in order, into normalisation statistics."""

    def __init__(
        self, num_features: int, *, seed: int, sample_size: int = 100_000, num_quantiles: int = 1000
    ):
        if sample_size < 2 or num_quantiles < 2:
            raise ValueError("`sample_size` and `num_quantiles` must be >= 2")
        self.num_features = num_features
        self.seed = seed
        self.sample_size = sample_size
        self.num_quantiles = num_quantiles
        empty = _Moments(0, np.zeros(num_features), np.zeros(num_features))
        self._raw, self._log = empty, empty
        self._min = np.full(num_features, np.inf)
        self._max = np.full(num_features, -np.inf)
        # Candidates are kept in pieces and compacted to the smallest keys only
        # when they exceed 1.5 times the sample size, so merging stays cheap.
        self._key_parts = [np.zeros(0)]
        self._row_parts = [np.zeros((0, num_features), dtype=np.float32)]
        self._candidates = 0
        self.threshold = 1.0  # keys above it can no longer enter the sample

    def _compact(self) -> np.ndarray:
        """Keeps the ``sample_size`` candidates with the smallest keys; returns their rows."""
        keys = np.concatenate(self._key_parts)
        if len(keys) > self.sample_size:
            self.threshold = float(np.partition(keys, self.sample_size - 1)[self.sample_size - 1])
            # Keys are distinct (hashes of distinct positions), so "<=" keeps exactly k.
            masks = [part <= self.threshold for part in self._key_parts]
            self._key_parts = [k[m] for k, m in zip(self._key_parts, masks)]
            self._row_parts = [r[m] for r, m in zip(self._row_parts, masks)]
        rows = np.concatenate(self._row_parts)
        self._key_parts, self._row_parts = [np.concatenate(self._key_parts)], [rows]
        self._candidates = len(rows)
        return rows

    def partial(self, features: np.ndarray, positions: np.ndarray) -> FitPartial:
        return FitPartial.of(features, positions, seed=self.seed, threshold=self.threshold)

    def merge(self, part: FitPartial) -> None:
        self._raw = self._raw.merge(part.raw)
        self._log = self._log.merge(part.log)
        self._min = np.minimum(self._min, part.minimum)
        self._max = np.maximum(self._max, part.maximum)
        keep = part.keys <= self.threshold
        self._key_parts.append(part.keys[keep])
        self._row_parts.append(part.rows[keep])
        self._candidates += int(keep.sum())
        if self._candidates > self.sample_size + self.sample_size // 2:
            self._compact()

    def result(self, method: str) -> dict:
        """The statistics as a JSON-ready dict; ``method`` is the transform models apply."""
        if method not in NORMALIZATIONS:
            raise ValueError(f"Unknown normalisation {method!r}; choose from {NORMALIZATIONS}")
        sample = self._compact()
        levels = np.linspace(0.0, 1.0, self.num_quantiles)
        quantiles = (
            _sorted_quantiles(sample, levels)
            if len(sample)
            else np.zeros((self.num_features, self.num_quantiles))
        )
        return {
            "method": method,
            "fitted_on": "train",
            "num_items": int(self._raw.count),
            "min": rounded(self._min),
            "max": rounded(self._max),
            "standard": {"mean": rounded(self._raw.mean), "std": rounded(self._raw.std())},
            "log1p": {"mean": rounded(self._log.mean), "std": rounded(self._log.std())},
            "quantile": {
                "output_distribution": "normal",
                "sample_size": int(len(sample)),
                "sampling": "bottom-k of SplitMix64(seed, item position) keys",
                "num_quantiles": self.num_quantiles,
                "levels": "linspace(0, 1, num_quantiles)",
                "values": [rounded(row) for row in quantiles],
            },
        }
