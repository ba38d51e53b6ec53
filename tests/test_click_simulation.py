"""The paper's click simulation: empirical frequencies against Eq. 10-12."""

from __future__ import annotations

import numpy as np
import pytest

from tfrecords_tools.click_simulation import (
    ClickConfig,
    intent_probabilities,
    list_rng,
    relevance_probability,
    simulate_clicks,
)

R_MAX = 4


def _within(observed: int, trials: int, p: float, sigmas: float = 5.0) -> bool:
    """Whether a binomial count is within ``sigmas`` standard errors of ``p``."""
    se = np.sqrt(max(p * (1 - p), 1e-12) / trials)
    return abs(observed / trials - p) <= sigmas * se + 1e-12


def test_relevance_probability_is_eq_10():
    rho = relevance_probability(np.arange(5), R_MAX)
    np.testing.assert_allclose(rho, [(2**r - 1) / 15 for r in range(5)])


def test_intent_probabilities_are_eq_11_and_sum_to_one():
    probs = intent_probabilities(np.arange(5), max_relevance=R_MAX, kappa=0.1)
    rho = relevance_probability(np.arange(5), R_MAX)
    np.testing.assert_allclose(probs[:, 0], 1 - rho)
    np.testing.assert_allclose(probs[:, 1], 0.9 * rho)
    np.testing.assert_allclose(probs[:, 2], 0.1 * rho)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)


@pytest.mark.parametrize(
    "field, value",
    [
        ("sample_size", 0),
        ("bootstraps", -1),
        ("kappa", 1.5),
        ("click_noise", -0.1),
        ("purchase_label", 1),
    ],
)
def test_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        ClickConfig(**{field: value})


def test_selection_samples_without_replacement_uniformly():
    config = ClickConfig(sample_size=4, bootstraps=50)
    relevance = np.zeros(10, dtype=np.int64)
    counts = np.zeros(10)
    for qid in range(200):
        sim = simulate_clicks(
            relevance, rng=list_rng(0, "train", qid), config=config, max_relevance=R_MAX
        )
        assert sim.indices.shape == (50, 4) and sim.labels.shape == (50, 4)
        assert all(len(set(row)) == 4 and list(row) == sorted(row) for row in sim.indices)
        counts += np.bincount(sim.indices.ravel(), minlength=10)
    trials = 200 * 50
    # Each item is in a sample of 4 out of 10 with probability 0.4.
    assert all(_within(int(c), trials, 0.4) for c in counts)


def test_short_lists_keep_every_item():
    sim = simulate_clicks(
        np.array([1, 0, 3]), rng=list_rng(1, "train", 5), config=ClickConfig(), max_relevance=R_MAX
    )
    assert sim.indices.tolist() == [[0, 1, 2]] * 10


def test_intent_and_click_frequencies_match_eq_11_and_12():
    config = ClickConfig(
        sample_size=16, bootstraps=10, kappa=0.1, click_noise=0.1, purchase_label=2
    )
    # Lists of 6 items always fully sampled, whose best label m varies with the qid.
    intents = {m: np.zeros(3, dtype=np.int64) for m in range(R_MAX + 1)}
    # Per (intent T, item relevance r): [items, purchases, clicks].
    outcomes = np.zeros((3, R_MAX + 1, 3), dtype=np.int64)
    base = np.array([0, 0, 1, 1, 2, 3])
    for qid in range(6000):
        m = qid % (R_MAX + 1)
        relevance = np.minimum(base, m)
        relevance[-1] = m
        sim = simulate_clicks(
            relevance, rng=list_rng(7, "train", qid), config=config, max_relevance=R_MAX
        )
        intents[m] += np.bincount(sim.intents, minlength=3)
        for t, labels, idx in zip(sim.intents, sim.labels, sim.indices):
            r = relevance[idx]
            np.add.at(outcomes[t, :, 0], r, 1)
            np.add.at(outcomes[t, :, 1], r, labels == 2)
            np.add.at(outcomes[t, :, 2], r, labels == 1)
    for m, counts in intents.items():
        expected = intent_probabilities(np.array(m), max_relevance=R_MAX, kappa=0.1)
        for t in range(3):
            assert _within(int(counts[t]), int(counts.sum()), float(expected[t])), (m, t)
    rho = relevance_probability(np.arange(R_MAX + 1), R_MAX)
    click = 0.1 + 0.9 * rho
    assert outcomes[0, :, 1:].sum() == 0  # no intent, no interaction
    for r in range(R_MAX + 1):
        items_t1, purchases_t1, clicks_t1 = outcomes[1, r]
        items_t2, purchases_t2, clicks_t2 = outcomes[2, r]
        assert purchases_t1 == 0
        assert _within(int(clicks_t1), int(items_t1), float(click[r])), r
        assert _within(int(purchases_t2), int(items_t2), float(rho[r])), r
        # A T=2 item not purchased is still clicked with the click probability.
        assert _within(int(clicks_t2), int(items_t2), float((1 - rho[r]) * click[r])), r
    assert outcomes[2, :, 0].sum() > 5000  # enough purchase sessions to test


def test_purchase_label_is_configurable():
    sim = simulate_clicks(
        np.full(8, 4),
        rng=list_rng(0, "train", 1),
        config=ClickConfig(kappa=1.0, purchase_label=4),
        max_relevance=R_MAX,
    )
    # rho(4) = 1 and kappa = 1: every session buys every item.
    assert (sim.labels == 4).all() and (sim.intents == 2).all()


def test_same_seed_same_draws_and_seed_matters():
    relevance = np.array([0, 1, 2, 3, 4, 0, 1, 2] * 4)

    def draw(seed, qid):
        sim = simulate_clicks(
            relevance, rng=list_rng(seed, "train", qid), config=ClickConfig(), max_relevance=R_MAX
        )
        return sim.indices.tolist(), sim.labels.tolist()

    assert draw(3, 10) == draw(3, 10)
    assert draw(3, 10) != draw(4, 10)
    assert draw(3, 10) != draw(3, 11)
