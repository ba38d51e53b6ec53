"""Implicit-feedback simulation of the RankFormer paper (Buyl et al., KDD 2023, Sec. 6.1;
Eq. 11 for the intent, which Algorithm 1's printed thresholds contradict)."""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np

from tfr_rankformer.core.config_io import require_positive_ints, setting


@dataclasses.dataclass(frozen=True)
class ClickConfig:
    """Parameters of the click simulation (RankFormer paper, Sec. 6.1 and App. C)."""

    sample_size: int = setting(16, "N_s, items per simulated list")
    bootstraps: int = setting(10, "N_b, simulated lists per original list")
    kappa: float = setting(0.1, "share of purchase intent")
    click_noise: float = setting(0.1, "eps, noise click rate")
    purchase_label: int = setting(
        2, "label of a purchase (the paper: 2; the authors' code: 4). Default: 2"
    )

    def __post_init__(self):
        require_positive_ints(self, "sample_size", "bootstraps")
        for name in ("kappa", "click_noise"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"`{name}` must lie in [0, 1], got {value!r}")
        if not isinstance(self.purchase_label, int) or self.purchase_label < 2:
            raise ValueError(f"`purchase_label` must be an int >= 2, got {self.purchase_label!r}")


@dataclasses.dataclass
class SimulatedLists:
    """The ``N_b`` lists drawn from one list: ``[N_b, k]`` positions in it (ascending,
    ``k = min(|J|, N_s)``), ``[N_b, k]`` implicit labels and ``[N_b]`` intents ``T``."""

    indices: np.ndarray
    labels: np.ndarray
    intents: np.ndarray


def relevance_probability(relevance: np.ndarray, max_relevance: int) -> np.ndarray:
    """``rho(r) = (2^r - 1) / (2^r_max - 1)`` (paper Eq. 10), as float64."""
    if max_relevance < 1:
        raise ValueError(f"`max_relevance` must be >= 1, got {max_relevance}")
    r = np.asarray(relevance, dtype=np.float64)
    return np.expm1(r * np.log(2.0)) / np.expm1(max_relevance * np.log(2.0))


def intent_probabilities(sample_max: np.ndarray, *, max_relevance: int, kappa: float) -> np.ndarray:
    """``[..., 3]`` probabilities of ``T = 0, 1, 2`` given the sample's best label (Eq. 11)."""
    rho = relevance_probability(sample_max, max_relevance)
    return np.stack([1.0 - rho, (1.0 - kappa) * rho, kappa * rho], axis=-1)


def list_rng(seed: int, split: str, qid: int) -> np.random.Generator:
    """The generator of one list, independent of the order in which lists are processed."""
    return np.random.default_rng([seed, zlib.crc32(split.encode("utf-8")), qid & (2**63 - 1)])


def simulate_clicks(
    relevance: np.ndarray, *, rng: np.random.Generator, config: ClickConfig, max_relevance: int
) -> SimulatedLists:
    """Draws ``N_b`` simulated lists with implicit labels from one list's ``[n]`` explicit
    labels (sampling, intent from the best label, purchases, noisy clicks: Sec. 6.1)."""
    relevance = np.asarray(relevance, dtype=np.int64)
    n = relevance.shape[0]
    k = min(n, config.sample_size)
    # Selection: the k smallest of n uniform keys form a uniform sample without
    # replacement; rows are then put back in file order.
    keys = rng.random((config.bootstraps, n))
    smallest = np.argpartition(keys, k - 1, axis=1)[:, :k] if k < n else np.argsort(keys, axis=1)
    indices = np.sort(smallest, axis=1)
    rho = relevance_probability(relevance[indices], max_relevance)  # [N_b, k]
    # Intent from the sample's best label (Eq. 11).
    probs = intent_probabilities(
        relevance[indices].max(axis=1), max_relevance=max_relevance, kappa=config.kappa
    )  # [N_b, 3]
    u = rng.random(config.bootstraps)
    intents = (u >= probs[:, 0]).astype(np.int64) + (u >= probs[:, 0] + probs[:, 1])
    # Interaction (Eq. 12).
    purchase_draw = rng.random((config.bootstraps, k))
    click_draw = rng.random((config.bootstraps, k))
    purchased = (intents[:, None] == 2) & (purchase_draw < rho)
    clicked = (
        (intents[:, None] >= 1)
        & ~purchased
        & (click_draw < config.click_noise + (1.0 - config.click_noise) * rho)
    )
    labels = np.where(purchased, config.purchase_label, clicked.astype(np.int64))
    return SimulatedLists(indices=indices, labels=labels.astype(np.int64), intents=intents)
