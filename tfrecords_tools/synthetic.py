"""Deterministic WEB30K-shaped LETOR data (136 features, 0-4 labels) whose relevance
depends on the list (a relative price, a majority category)."""

from __future__ import annotations

import dataclasses
import math
import os
import zlib

import numpy as np

from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.core.config_io import require_positive_ints, setting

_THRESHOLDS = (0.3, 1.3, 2.1, 2.8)
NUM_FEATURES = 136
MAX_RELEVANCE = 4
# How list lengths spread around their mean (see ``list_sizes``).
LENGTH_SPREADS = ("default", "web30k")


@dataclasses.dataclass(frozen=True)
class SyntheticConfig:
    """Size and seed of a synthetic dataset; the same config gives byte-identical files."""

    train_queries: int = setting(
        300, "train lists (vali and test get a third each)", flag="--synthetic-lists"
    )
    vali_queries: int = 100
    test_queries: int = 100
    mean_list_size: int = setting(
        40,
        "mean list size. Default: 40 (synthetic-text: 20 documents)",
        flag="--synthetic-list-size",
    )
    seed: int = 0
    length_spread: str = setting(
        "default",
        "how list lengths spread around their mean: 'default' (the default; log-normal, "
        "sigma 0.6, within 2 and 6 x the mean) or 'web30k' (MSLR-WEB30K's heavy right tail: "
        "log-normal, sigma 0.75, within 1 and 10.4 x the mean, i.e. 1 to 1,251 items at "
        "--synthetic-list-size 120, median about 0.76 x the mean)",
        flag="--synthetic-length-spread",
        choices=LENGTH_SPREADS,
    )

    def __post_init__(self):
        require_positive_ints(
            self, "train_queries", "vali_queries", "test_queries", "mean_list_size"
        )
        if self.length_spread not in LENGTH_SPREADS:
            raise ValueError(
                f"`length_spread` must be one of {', '.join(LENGTH_SPREADS)}, "
                f"got {self.length_spread!r}"
            )

    @classmethod
    def web30k_shaped(
        cls, num_items: int, *, seed: int = 0, length_spread: str = "default"
    ) -> SyntheticConfig:
        """A train split of about ``num_items`` items in WEB30K-sized lists (mean 120)."""
        queries = max(1, round(num_items / 120))
        return cls(
            train_queries=queries,
            vali_queries=1,
            test_queries=1,
            mean_list_size=120,
            seed=seed,
            length_spread=length_spread,
        )


def list_sizes(
    rng: np.random.Generator, count: int, mean: int, spread: str = "default"
) -> np.ndarray:
    """``count`` list lengths of mean about ``mean``, spread as ``--synthetic-length-spread``."""
    if spread == "web30k":
        return _web30k_sizes(rng, count, mean)
    if spread != "default":
        raise ValueError(f"unknown length spread {spread!r}; choose from {LENGTH_SPREADS}")
    sigma = 0.6
    sizes = rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, size=count)
    return np.clip(np.rint(sizes), 2, 6 * mean).astype(np.int64)


_WEB30K_SIGMA = 0.75
_WEB30K_LONGEST = 1251 / 120  # WEB30K's longest list over its mean list length


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _truncated_lognormal_mean(mu: float, sigma: float, low: float, high: float) -> float:
    """The mean of ``exp(N(mu, sigma^2))`` given that it lies in ``[low, high]``."""
    a, b = (math.log(low) - mu) / sigma, (math.log(high) - mu) / sigma
    inside = _normal_cdf(b) - _normal_cdf(a)
    shifted = _normal_cdf(b - sigma) - _normal_cdf(a - sigma)
    return math.exp(mu + sigma**2 / 2) * shifted / inside


def _web30k_sizes(rng: np.random.Generator, count: int, mean: int) -> np.ndarray:
    sigma, low, high = _WEB30K_SIGMA, 0.5, round(mean * _WEB30K_LONGEST) + 0.5
    # The truncated mean grows with mu: bisect for the mu that gives ``mean``.
    lo, hi = math.log(low) - 5 * sigma, math.log(high)
    for _ in range(100):
        mu = (lo + hi) / 2
        if _truncated_lognormal_mean(mu, sigma, low, high) < mean:
            lo = mu
        else:
            hi = mu
    sizes = rng.lognormal(mu, sigma, size=count)
    outside = (sizes <= low) | (sizes >= high)
    while outside.any():
        sizes[outside] = rng.lognormal(mu, sigma, size=int(outside.sum()))
        outside = (sizes <= low) | (sizes >= high)
    return np.rint(sizes).astype(np.int64)


# Columns printed as integers (MSLR's counts); the others get six decimals.
_INTEGER_COLUMNS = np.zeros(NUM_FEATURES, dtype=bool)
_INTEGER_COLUMNS[0:40:2] = True
_INTEGER_COLUMNS[61:] = np.arange(61, NUM_FEATURES) % 3 != 0
_CATEGORY = 61  # column 62: always an integer column
_INTENT_SHARE = 0.8  # the share of a list's items that match its query's intent
_INTENT_EFFECT = 1.2


@dataclasses.dataclass(frozen=True)
class LatentList:
    """The hidden variables of one generated list (see :func:`draw_latent_list`)."""

    quality: np.ndarray
    difficulty: float
    log_price: np.ndarray
    intent: int
    category: np.ndarray
    utility: np.ndarray
    noise: np.ndarray

    @property
    def labels(self) -> np.ndarray:
        return np.digitize(self.utility, _THRESHOLDS)


def draw_latent_list(rng: np.random.Generator, n: int) -> LatentList:
    """Hidden variables of one list: utility ``g_i + b_q - 1.2 (p_i - mean p) + 1.2 ([c_i =
    m_q] - 0.8) + noise`` cut into labels; the category helps only a model seeing the list."""
    difficulty = rng.normal(-0.4, 0.7)
    log_price = rng.normal(3.0, 1.0) + rng.normal(0.0, 0.5, size=n)
    quality = rng.normal(0.0, 1.0, size=n)
    intent = int(rng.integers(2))
    category = np.where(rng.random(n) < _INTENT_SHARE, intent, 1 - intent)
    matches = (category == intent).astype(np.float64)
    noise = rng.normal(0.0, 0.3, size=n)
    utility = (
        quality
        + difficulty
        - 1.2 * (log_price - log_price.mean())
        + _INTENT_EFFECT * (matches - _INTENT_SHARE)
        + noise
    )
    return LatentList(quality, difficulty, log_price, intent, category, utility, noise)


def _list_features(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Features ``[n, 136]`` and labels ``[n]`` of one list."""
    latent = draw_latent_list(rng, n)
    x = np.empty((n, NUM_FEATURES))
    noise_scale = np.linspace(0.3, 2.0, 40)
    x[:, :40] = latent.quality[:, None] + rng.normal(size=(n, 40)) * noise_scale
    x[:, 0:40:2] = np.floor(np.exp(x[:, 0:40:2]))  # count-like views
    x[:, 40:60] = latent.difficulty + rng.normal(0.0, 0.2, size=(n, 20))
    x[:, 60] = np.round(np.exp(latent.log_price), 2)
    x[:, 61:] = rng.normal(size=(n, NUM_FEATURES - 61))
    counts = _INTEGER_COLUMNS[61:]
    x[:, 61:][:, counts] = np.floor(np.maximum(x[:, 61:][:, counts], 0.0) * 8)
    x[:, _CATEGORY] = latent.category
    return x, latent.labels


_LINE_FORMAT = " ".join(
    f"{j + 1}:%d" if _INTEGER_COLUMNS[j] else f"{j + 1}:%.6f" for j in range(NUM_FEATURES)
)


def generate_letor(directory: str, config: SyntheticConfig = SyntheticConfig()) -> dict[str, str]:
    """Writes ``{train,vali,test}.txt`` into ``directory``; returns ``{split: path}``."""
    os.makedirs(directory, exist_ok=True)
    paths, qid = {}, 1
    for split in ("train", "vali", "test"):
        count = getattr(config, f"{split}_queries")
        rng = np.random.default_rng([config.seed, zlib.crc32(split.encode())])
        sizes = list_sizes(rng, count, config.mean_list_size, config.length_spread)
        paths[split] = os.path.join(directory, f"{split}.txt")
        with atomic_write(paths[split], "w", encoding="ascii", newline="\n") as f:
            for n in sizes.tolist():
                x, labels = _list_features(rng, n)
                f.writelines(
                    f"{label} qid:{qid} {_LINE_FORMAT % tuple(row)}\n"
                    for label, row in zip(labels.tolist(), x.tolist())
                )
                qid += 1
    return paths
