"""The synthetic generator: deterministic, WEB30K-shaped, with a list-context effect."""

from __future__ import annotations

import hashlib
import zlib

import numpy as np
import pytest

from tfrecords_tools.letor.letor_parser import parse_letor_lines
from tfrecords_tools.synthetic import SyntheticConfig, generate_letor, list_sizes

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


# The default spread's first lengths as the generator drew them before the
# web30k spread was added: recorded results depend on these exact files.
DEFAULT_LENGTHS_SEED_0 = [108, 93, 147, 107, 73, 125, 219, 177, 66, 47, 69, 103]
DEFAULT_FILES_SHA256 = {
    "train": "aa043733ce93fc1dccfd1d37d0ff6720354f2c7bfcf1f7afad7b5d8f3de81d70",
    "vali": "0d4a1c99944dbd13b1beaf6e43fe32e457bca61c41e198171fd16172ab46e0db",
    "test": "7eaf26546fc635116ab333fa7ab0fa6665cbc22ecec0383c3c3078373bf47c9c",
}


def test_the_default_spread_is_unchanged(tmp_path):
    assert list_sizes(np.random.default_rng(0), 12, 120).tolist() == DEFAULT_LENGTHS_SEED_0
    again = list_sizes(np.random.default_rng(0), 12, 120, "default").tolist()
    assert again == DEFAULT_LENGTHS_SEED_0
    assert list_sizes(np.random.default_rng(7), 8, 40).tolist() == [33, 40, 28, 20, 25, 18, 35, 75]
    config = SyntheticConfig(
        train_queries=40, vali_queries=5, test_queries=5, mean_list_size=30, seed=4
    )
    assert config.length_spread == "default"
    paths = generate_letor(str(tmp_path), config)
    for split, path in paths.items():
        with open(path, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == DEFAULT_FILES_SHA256[split], split


@pytest.mark.parametrize("count", [18_900, 31_531])
def test_the_web30k_spread_spans_web30ks_lengths(count):
    sizes = list_sizes(np.random.default_rng(0), count, 120, "web30k")
    assert sizes.dtype == np.int64 and len(sizes) == count
    assert 1 <= sizes.min() <= 6 and sizes.max() <= 1251
    # The longest list comes out near WEB30K's 1,251.
    assert sizes.max() > 1200 and (sizes > 1000).sum() >= 2
    assert abs(sizes.mean() - 120) < 0.03 * 120
    # A right tail: the median below the mean, a long 99th percentile.
    assert 80 < np.median(sizes) < 100 and 450 < np.percentile(sizes, 99) < 600


def test_the_web30k_spread_scales_with_the_mean():
    sizes = list_sizes(np.random.default_rng(1), 31_531, 40, "web30k")
    assert sizes.min() >= 1 and sizes.max() <= round(40 * 1251 / 120) == 417 < sizes.max() + 30
    assert abs(sizes.mean() - 40) < 0.03 * 40
    with pytest.raises(ValueError, match="unknown length spread 'wide'"):
        list_sizes(np.random.default_rng(1), 3, 40, "wide")


def test_generated_files_follow_the_web30k_spread(tmp_path):
    config = SyntheticConfig(
        train_queries=80, vali_queries=2, test_queries=2, mean_list_size=12, length_spread="web30k"
    )
    paths = generate_letor(str(tmp_path), config)
    with open(paths["train"], "rb") as f:
        parsed = parse_letor_lines(
            f.read().split(b"\n"), num_features=136, path="train", first_line=1
        )
    sizes = np.bincount(np.unique(parsed.qids, return_inverse=True)[1])
    expected = list_sizes(
        np.random.default_rng([config.seed, zlib.crc32(b"train")]), 80, 12, "web30k"
    )
    assert sizes.tolist() == expected.tolist() and sizes.min() >= 1


def test_length_spread_is_validated_and_reaches_the_config():
    with pytest.raises(ValueError, match="`length_spread` must be one of default, web30k"):
        SyntheticConfig(length_spread="WEB30K")
    assert SyntheticConfig.web30k_shaped(12_000).length_spread == "default"
    shaped = SyntheticConfig.web30k_shaped(12_000, length_spread="web30k", seed=3)
    assert (shaped.train_queries, shaped.mean_list_size, shaped.seed) == (100, 120, 3)
    assert shaped.length_spread == "web30k"
    from pipelines.convert_cli import _settings, build_parser

    parser = build_parser()
    args = ["--input", "synthetic", "--output", "out", "--synthetic-list-size", "120"]
    config = _settings(parser.parse_args([*args, "--synthetic-length-spread", "web30k"]))
    assert config.synthetic.length_spread == "web30k" and config.synthetic.mean_list_size == 120
    assert _settings(parser.parse_args(args)).synthetic.length_spread == "default"
    with pytest.raises(SystemExit):
        parser.parse_args([*args, "--synthetic-length-spread", "wide"])
