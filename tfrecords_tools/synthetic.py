"""A deterministic generator of WEB30K-shaped LETOR data with list-context effects.

The shape follows MSLR-WEB30K: 136 features, lists of varying length, skewed
0-4 labels with many lists holding no relevant item. An item's relevance
depends on the other items of its list: it falls with the item's price
*relative to the prices in its list*, and each query has its own price level,
so predicting the level of a list's labels (and its list label) needs the
list. Within one list that effect orders items as their absolute prices do,
so alone it would give listwise models no edge on within-list ranking.

A second effect changes the order within a list. Each query is ambiguous
between two intents; most of its results carry the query's intent as their
category, so a list's majority category reveals it, and items of that
category are more relevant. Each category is the majority in half of the
lists, so an item's own category says nothing of its relevance: only a model
that sees the list can use it (``pipelines.benchmarks.synthetic_ceiling``
measures what it is worth).

Per query ``q`` and item ``i``:

* query difficulty ``b_q ~ N(-0.4, 0.7)`` and price level ``log P_q ~ N(3, 1)``;
* item quality ``g_i ~ N(0, 1)``, log price ``p_i = log P_q + N(0, 0.5)``;
* intent ``m_q``, 0 or 1 with equal odds; item category ``c_i`` equals
  ``m_q`` with probability 0.8;
* utility ``u_i = g_i + b_q - 1.2 (p_i - mean_j p_j) + 1.2 ([c_i = m_q] - 0.8)
  + N(0, 0.3)``;
* label: ``u_i`` cut at 0.3, 1.3, 2.1, 2.8 (about 68/20/8/3/1 % of items).

Features 1-40 are noisy views of ``g_i`` (every other one a count), 41-60
noisy views of ``b_q`` shared by the list, 61 the price, 62 the category
``c_i`` (0 or 1), 63-136 noise (two thirds integer counts, many of them
zero). As in the MSLR files, integer features are printed as integers and the
others with six decimals.
"""

from __future__ import annotations

import dataclasses
import math
import os
import zlib

import numpy as np

from tfr_rankformer.core.config_io import require_positive_ints, setting

__all__ = [
    "LENGTH_SPREADS",
    "SyntheticConfig",
    "LatentList",
    "draw_latent_list",
    "list_sizes",
    "generate_split",
    "generate_letor",
]

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
        """A train split of about ``num_items`` items in WEB30K-sized lists (mean 120).

        ``length_spread="web30k"`` also gives the lists WEB30K's spread of lengths.
        """
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
    """``count`` list lengths with mean about ``mean``.

    ``spread="default"``: log-normal with sigma 0.6, rounded and clipped to
    [2, 6 x mean].

    ``spread="web30k"``: MSLR-WEB30K's spread (31,531 queries of 1 to 1,251
    documents, mean about 120, a right tail). Log-normal with sigma 0.75,
    the spread at which the longest of 18,900 or 31,531 lists comes out near
    WEB30K's 1,251 (with sigma 1.1 a twentieth of the lists would be over 400
    items), truncated to [1, round(mean x 1251 / 120)] (1,251 at mean 120; the
    bound scales with the mean): a draw that rounds outside is drawn again, so
    no lengths pile up at the bounds. Its location is set so that the truncated
    distribution's mean is ``mean``; the median is then about 0.76 x mean.
    Measured at mean 120 with ``np.random.default_rng(0)`` (over seeds 0-2 the
    mean lies in 118.6-120.5 and the longest list in 1,235-1,251):

    ============  ===  =====  =====  ==  ==  ==  ===  ===  ===  ===
    lists         min  max    mean   p1  p5  p25 p50  p75  p95  p99
    ============  ===  =====  =====  ==  ==  ==  ===  ===  ===  ===
    18,900        4    1,251  120.5  16  27  55  91   153  310  512
    31,531        3    1,251  120.1  16  27  55  90   151  310  517
    ============  ===  =====  =====  ==  ==  ==  ===  ===  ===  ===
    """
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
    """The hidden variables of one generated list (for analyses of the data).

    Attributes:
      quality: ``g_i``.
      difficulty: ``b_q``.
      log_price: ``p_i``.
      intent: ``m_q``.
      category: ``c_i``.
      utility: ``u_i``, noise included.
      noise: the noise term of ``u_i``.
    """

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
    """Draws the hidden variables of one list of ``n`` items."""
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


def generate_split(
    path: str,
    *,
    num_queries: int,
    first_qid: int,
    mean_list_size: int,
    rng: np.random.Generator,
    length_spread: str = "default",
) -> int:
    """Writes one split as LETOR text; returns the number of items written."""
    sizes = list_sizes(rng, num_queries, mean_list_size, length_spread)
    items = 0
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for offset, n in enumerate(sizes.tolist()):
            x, labels = _list_features(rng, n)
            qid = first_qid + offset
            f.writelines(
                f"{label} qid:{qid} {_LINE_FORMAT % tuple(row)}\n"
                for label, row in zip(labels.tolist(), x.tolist())
            )
            items += n
    return items


def generate_letor(directory: str, config: SyntheticConfig = SyntheticConfig()) -> dict[str, str]:
    """Writes ``train.txt``, ``vali.txt`` and ``test.txt`` into ``directory``.

    Qids are disjoint across splits. Returns ``{split: path}``.
    """
    os.makedirs(directory, exist_ok=True)
    paths, first_qid = {}, 1
    for split, count in (
        ("train", config.train_queries),
        ("vali", config.vali_queries),
        ("test", config.test_queries),
    ):
        rng = np.random.default_rng([config.seed, zlib.crc32(split.encode())])
        paths[split] = os.path.join(directory, f"{split}.txt")
        generate_split(
            paths[split],
            num_queries=count,
            first_qid=first_qid,
            mean_list_size=config.mean_list_size,
            rng=rng,
            length_spread=config.length_spread,
        )
        first_qid += count
    return paths
