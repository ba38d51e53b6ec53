"""The synthetic generator: deterministic, WEB30K-shaped, with a list-context effect."""

from __future__ import annotations

import numpy as np
import pytest

from tfrecords_tools.letor_parser import parse_letor_lines
from tfrecords_tools.synthetic import SyntheticConfig, generate_letor

CONFIG = SyntheticConfig(
    train_queries=150, vali_queries=5, test_queries=5, mean_list_size=40, seed=2
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("syn")
    paths = generate_letor(str(root), CONFIG)
    with open(paths["train"], "rb") as f:
        parsed = parse_letor_lines(
            f.read().split(b"\n"), num_features=136, path="train", first_line=1
        )
    return paths, parsed


def test_same_seed_same_bytes(generated, tmp_path):
    paths, _ = generated
    again = generate_letor(str(tmp_path), CONFIG)
    other = generate_letor(
        str(tmp_path / "other"),
        SyntheticConfig(
            train_queries=150, vali_queries=5, test_queries=5, mean_list_size=40, seed=3
        ),
    )
    for split in ("train", "vali", "test"):
        assert open(paths[split], "rb").read() == open(again[split], "rb").read()
    assert open(paths["train"], "rb").read() != open(other["train"], "rb").read()


def test_web30k_shape(generated):
    _, parsed = generated
    assert parsed.features.shape[1] == 136
    sizes = np.bincount(np.unique(parsed.qids, return_inverse=True)[1])
    assert len(sizes) == 150 and sizes.min() >= 2 and sizes.std() > 5
    labels = np.bincount(parsed.labels, minlength=5)
    assert labels.argmax() == 0 and (labels > 0).all()
    # Skewed like WEB30K: about half the items are irrelevant, few are perfect.
    assert 0.4 < labels[0] / labels.sum() < 0.75 and labels[4] / labels.sum() < 0.05
    best = [parsed.labels[parsed.qids == q].max() for q in np.unique(parsed.qids)]
    assert 0 < np.mean(np.array(best) == 0) < 0.5  # some lists hold no relevant item


def test_relevance_depends_on_price_relative_to_the_list(generated):
    _, parsed = generated
    price = np.log(parsed.features[:, 60])
    relative = price.copy()
    for q in np.unique(parsed.qids):
        members = parsed.qids == q
        relative[members] -= price[members].mean()
    labels = parsed.labels.astype(float)
    absolute_corr = np.corrcoef(-price, labels)[0, 1]
    relative_corr = np.corrcoef(-relative, labels)[0, 1]
    # Only a model that sees the other items' prices can use the price well.
    assert relative_corr > 0.25 and relative_corr > absolute_corr + 0.15


def test_config_validation():
    with pytest.raises(ValueError, match="train_queries"):
        SyntheticConfig(train_queries=0)
    assert SyntheticConfig.web30k_shaped(12_000).train_queries == 100


def test_relevance_depends_on_the_lists_majority_category(generated):
    _, parsed = generated
    category = parsed.features[:, 61]
    assert set(np.unique(category)) == {0.0, 1.0}
    matches = np.empty_like(category)
    for q in np.unique(parsed.qids):
        members = parsed.qids == q
        majority = float(category[members].mean() > 0.5)
        matches[members] = category[members] == majority
    labels = parsed.labels.astype(float)
    # An item's own category says next to nothing; whether it shares its list's
    # majority category does, and that changes the order within a list.
    assert abs(np.corrcoef(category, labels)[0, 1]) < 0.08
    assert np.corrcoef(matches, labels)[0, 1] > 0.15


def test_the_list_context_is_worth_several_ndcg_points():
    from pipelines.benchmarks.synthetic_ceiling import ceilings

    result = ceilings(400, seed=1)
    assert result["lists_counted"] > 300
    # Knowing the list's intent is worth points that no pointwise ranking can get.
    assert result["utility"] > result["pointwise"] + 3 > result["quality"] + 3
