"""NDCG, list exclusion and list-head metrics against hand counts and scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import ndcg_score, roc_auc_score

from tfr_rankformer.ranking.ranking_metrics import (
    CONVENTION,
    dcg_gains,
    evaluate_rankings,
    ndcg_at_k,
)

LOG2_3 = math.log2(3)


def _random_lists(rng, num_lists, max_len=50, tie_decimals=None):
    """Unpadded lists of lengths 2..max_len, integer labels 0-4, none all zero."""
    lists = []
    while len(lists) < num_lists:
        size = int(rng.integers(2, max_len + 1))
        labels = rng.integers(0, 5, size)
        if not labels.any():
            continue
        scores = rng.normal(size=size)
        if tie_decimals is not None:
            scores = np.round(scores, tie_decimals)
        lists.append((scores, labels))
    return lists


def _pad(lists, list_size, pad_score=99.0, pad_label=-1.0):
    """Padded [num_lists, list_size] arrays; padding gets a high score to catch leaks."""
    num_lists = len(lists)
    scores = np.full((num_lists, list_size), pad_score)
    labels = np.full((num_lists, list_size), pad_label)
    relevance = np.full((num_lists, list_size), pad_label)
    mask = np.zeros((num_lists, list_size), dtype=bool)
    for i, (s, y, r) in enumerate(lists):
        scores[i, : len(s)], labels[i, : len(s)], relevance[i, : len(s)] = s, y, r
        mask[i, : len(s)] = True
    return scores, labels, relevance, mask


# === dcg_gains and ndcg_at_k by hand ===


def test_dcg_gains():
    np.testing.assert_array_equal(dcg_gains([0, 1, 2, 3]), [0.0, 1.0, 3.0, 7.0])
    np.testing.assert_array_equal(dcg_gains([0, 1, 2.5], gain="linear"), [0.0, 1.0, 2.5])
    assert dcg_gains(np.array([1], dtype=np.int32)).dtype == np.float64
    with pytest.raises(ValueError, match="Unknown gain 'cubic'"):
        dcg_gains([1], gain="cubic")


def test_ndcg_by_hand_exponential():
    # Scores rank the items as given: labels 1, 2, 0 -> gains 2**y - 1 = 1, 3, 0.
    # DCG = 1/log2(2) + 3/log2(3) + 0/log2(4) = 1 + 3/log2(3) = 2.892789
    # Ideal order 2, 1, 0 -> IDCG = 3 + 1/log2(3) = 3.630930; NDCG = 0.796708
    scores, labels = [0.9, 0.5, 0.1], [1, 2, 0]
    expected = (1 + 3 / LOG2_3) / (3 + 1 / LOG2_3)
    assert expected == pytest.approx(0.796708, abs=1e-6)
    assert ndcg_at_k(scores, labels, None) == pytest.approx(expected, rel=1e-12)
    assert ndcg_at_k(scores, labels, 3) == pytest.approx(expected, rel=1e-12)
    # @1: DCG = 1, IDCG = 3.  @2: DCG = 1 + 3/log2(3), IDCG = 3 + 1/log2(3), as @3.
    assert ndcg_at_k(scores, labels, 1) == pytest.approx(1 / 3, rel=1e-12)
    assert ndcg_at_k(scores, labels, 2) == pytest.approx(expected, rel=1e-12)


def test_ndcg_by_hand_linear():
    # Linear gains 1, 2, 0: DCG = 1 + 2/log2(3) = 2.261860, IDCG = 2 + 1/log2(3) = 2.630930.
    expected = (1 + 2 / LOG2_3) / (2 + 1 / LOG2_3)
    assert expected == pytest.approx(0.859719, abs=1e-6)
    got = ndcg_at_k([0.9, 0.5, 0.1], [1, 2, 0], None, gain="linear")
    assert got == pytest.approx(expected, rel=1e-12)
    assert ndcg_at_k([0.9, 0.5, 0.1], [1, 2, 0], 1, gain="linear") == pytest.approx(0.5)


def test_ndcg_by_hand_tied_scores():
    # Items 0 and 1 tie at 0.5 and share ranks 0-1: each gets the mean gain (0 + 3) / 2 = 1.5.
    # DCG = 1.5 * (1/log2(2) + 1/log2(3)) + 1/log2(4) = 1.5 * 1.630930 + 0.5 = 2.946395
    # IDCG = 3 + 1/log2(3) = 3.630930; NDCG = 0.811471.  @1: DCG = 1.5 * 1, IDCG = 3 -> 0.5.
    expected = (1.5 * (1 + 1 / LOG2_3) + 0.5) / (3 + 1 / LOG2_3)
    assert expected == pytest.approx(0.811471, abs=1e-6)
    for scores, labels in (([0.5, 0.5, 0.1], [0, 2, 1]), ([0.1, 0.5, 0.5], [1, 2, 0])):
        assert ndcg_at_k(scores, labels, None) == pytest.approx(expected, rel=1e-12)
        assert ndcg_at_k(scores, labels, 1) == pytest.approx(0.5, rel=1e-12)


def test_ndcg_edge_cases():
    assert math.isnan(ndcg_at_k([0.3, 0.2], [0, 0], 5))  # IDCG 0: callers leave it out
    assert math.isnan(ndcg_at_k([], [], None))
    assert ndcg_at_k([0.3], [2], 1) == 1.0
    assert ndcg_at_k([0.3, 0.2], [1, 0], 50) == 1.0  # k beyond the list
    assert isinstance(ndcg_at_k([0.3, 0.2], [1, 0], 1), float)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([0.1, 0.2], [1], 1), "same length"),
        (([[0.1, 0.2]], [[1, 0]], 1), "1-D"),
        (([0.1, 0.2], [1, 0], 0), "positive int"),
        (([0.1, 0.2], [1, 0], -3), "positive int"),
        (([0.1, 0.2], [1, 0], 1.5), "positive int"),
        (([0.1, np.nan], [1, 0], 1), "scores"),
        (([0.1, 0.2], [1, -1], 1), "non-negative"),
    ],
)
def test_ndcg_at_k_rejects_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        ndcg_at_k(*args)


# === ndcg_at_k against scikit-learn ===


@pytest.mark.parametrize("tie_decimals", [None, 0, 1])
@pytest.mark.parametrize("k", [1, 5, 10, None])
def test_ndcg_matches_sklearn(k, tie_decimals):
    rng = np.random.default_rng(0 if tie_decimals is None else 1 + tie_decimals)
    lists = _random_lists(rng, 200, tie_decimals=tie_decimals)
    if tie_decimals is not None:  # the rounding must really produce ties
        assert sum(len(np.unique(s)) < len(s) for s, _ in lists) > 100
    for scores, labels in lists:
        linear = ndcg_score([labels], [scores], k=k)
        exponential = ndcg_score([2.0**labels - 1], [scores], k=k)
        assert ndcg_at_k(scores, labels, k, gain="linear") == pytest.approx(linear, rel=1e-10)
        assert ndcg_at_k(scores, labels, k) == pytest.approx(exponential, rel=1e-10)


# === evaluate_rankings ===


def _three_lists():
    """Counted for y and r; y all equal (r not); one item only (excluded for both)."""
    return [
        ([0.9, 0.5, 0.1], [1, 2, 0], [0, 1, 3]),
        ([0.2, 0.8, 0.4, 0.6], [1, 1, 1, 1], [2, 0, 1, 0]),
        ([0.7], [2], [3]),
    ]


def test_all_equal_lists_are_left_out():
    lists = _three_lists()
    out = evaluate_rankings(*_pad(lists, 5), ks=(1, 3))
    assert (out["num_lists"], out["num_lists_y"], out["num_lists_r"]) == (3, 1, 2)
    for k in (1, 3):
        s, y, _ = lists[0]
        assert out[f"ndcg_y@{k}"] == pytest.approx(100 * ndcg_at_k(s, y, k))
        expected_r = np.mean([ndcg_at_k(s, r, k) for s, _, r in lists[:2]])
        assert out[f"ndcg_r@{k}"] == pytest.approx(100 * expected_r)
    assert out["convention"] == CONVENTION
    assert "ndcg_y@10_tmax" not in out and "list_acc_t>=1" not in out


def test_no_counted_list_is_named_never_nan():
    out = evaluate_rankings(*_pad([([0.3, 0.1], [1, 1], [0, 0]), ([0.2], [2], [1])], 3), ks=(5,))
    assert (out["num_lists_y"], out["num_lists_r"]) == (0, 0)
    assert "ndcg_y@5" not in out and "ndcg_r@5" not in out
    assert out["not_measured"].startswith("ndcg_y@5, ndcg_r@5: no list to measure on")


def test_empty_lists_are_ignored():
    lists = _three_lists()
    scores, labels, relevance, mask = _pad(lists, 4)
    mask[2] = False  # the one-item list becomes an empty row
    out = evaluate_rankings(scores, labels, relevance, mask, list_probs=np.full((3, 1), 0.9))
    assert (out["num_lists"], out["num_lists_y"], out["num_lists_r"]) == (2, 1, 2)
    assert out["list_acc_t>=1"] == 1.0  # both non-empty lists have t >= 1


@pytest.mark.parametrize("gain", ["exponential", "linear"])
def test_padding_does_not_change_results(gain):
    rng = np.random.default_rng(7)
    lists = [
        (s, y, rng.integers(0, 5, len(s)))
        for s, y in _random_lists(rng, 60, max_len=30, tie_decimals=1)
    ]
    ks = (1, 5, 10)
    narrow = evaluate_rankings(*_pad(lists, 30), ks=ks, max_label=4, gain=gain)
    wide = evaluate_rankings(*_pad(lists, 45, pad_score=-5.0, pad_label=7.0), ks=ks, gain=gain)
    for k in ks:
        for name, column in (("y", 1), ("r", 2)):
            per_list = [
                ndcg_at_k(item[0], item[column], k, gain=gain)
                for item in lists
                if len(np.unique(item[column])) > 1
            ]
            assert narrow[f"num_lists_{name}"] == len(per_list)
            assert narrow[f"ndcg_{name}@{k}"] == pytest.approx(100 * np.mean(per_list), rel=1e-10)
            assert wide[f"ndcg_{name}@{k}"] == pytest.approx(narrow[f"ndcg_{name}@{k}"], rel=1e-12)


def test_masking_an_item_equals_deleting_it():
    s, y, r = [0.4, 0.9, 0.1, 0.6], [0, 1, 2, 2], [1, 0, 0, 3]
    scores, labels, relevance, mask = _pad([(s, y, r)], 4)
    mask[0, 1] = False  # drop the top-scored item
    masked = evaluate_rankings(scores, labels, relevance, mask, ks=(1, 3))
    deleted = evaluate_rankings(*_pad([([0.4, 0.1, 0.6], [0, 2, 2], [1, 0, 3])], 3), ks=(1, 3))
    full = evaluate_rankings(*_pad([(s, y, r)], 4), ks=(1, 3))
    for key in ("ndcg_y@1", "ndcg_y@3", "ndcg_r@1", "ndcg_r@3"):
        assert masked[key] == pytest.approx(deleted[key], rel=1e-12)
    assert full["ndcg_y@1"] != pytest.approx(masked["ndcg_y@1"])  # the item did matter


def test_permuting_items_leaves_results_unchanged():
    rng = np.random.default_rng(3)
    lists = [(s, y, y[::-1]) for s, y in _random_lists(rng, 40, max_len=12, tie_decimals=0)]
    base = evaluate_rankings(*_pad(lists, 12))
    permuted = []
    for s, y, r in lists:
        p = rng.permutation(len(s))
        permuted.append((s[p], y[p], r[p]))
    shuffled = evaluate_rankings(*_pad(permuted, 12))
    for key, value in base.items():
        if key != "convention":
            assert shuffled[key] == pytest.approx(value, rel=1e-12), key


def test_ndcg_r_uses_relevance():
    # The scores rank y perfectly and r in reverse.
    lists = [([0.9, 0.5, 0.1], [2, 1, 0], [0, 1, 3]), ([0.3, 0.2], [1, 0], [0, 2])]
    out = evaluate_rankings(*_pad(lists, 3), ks=(1, 3))
    assert out["ndcg_y@1"] == pytest.approx(100.0) and out["ndcg_y@3"] == pytest.approx(100.0)
    assert out["ndcg_r@1"] == pytest.approx(0.0)
    expected = np.mean([ndcg_at_k(s, r, 3) for s, _, r in lists])
    assert out["ndcg_r@3"] == pytest.approx(100 * expected) and expected < 0.8


def test_ndcg_y_at_10_tmax_subset():
    lists = [
        ([0.9, 0.5, 0.1], [0, 2, 1], [1, 1, 1]),  # t = 2, counted
        ([0.9, 0.5, 0.1], [2, 0, 0], [1, 1, 1]),  # t = 2, counted
        ([0.9, 0.5, 0.1], [0, 0, 1], [1, 1, 1]),  # t = 1: not in the subset
        ([0.9, 0.5], [2, 2], [1, 1]),  # t = 2 but all equal: left out
    ]
    out = evaluate_rankings(*_pad(lists, 3), ks=(1,), max_label=2)
    expected = np.mean([ndcg_at_k(s, y, 10) for s, y, _ in lists[:2]])
    assert out["ndcg_y@10_tmax"] == pytest.approx(100 * expected)
    assert out["ndcg_y@10_tmax"] != pytest.approx(100 * ndcg_at_k(*lists[2][:2], 10))
    assert "ndcg_y@10" not in out  # 10 is computed for the subset, not reported
    assert "ndcg_y@10_tmax" not in evaluate_rankings(*_pad(lists, 3), max_label=3)


def test_list_head_metrics_against_sklearn_and_hand_count():
    # t = max y per list: 0, 1, 2, 2, 1, 0 (the all-equal lists count here too).
    lists = [
        ([0.1, 0.2], [0, 0], [0, 1]),
        ([0.1, 0.2], [1, 0], [0, 1]),
        ([0.1, 0.2], [2, 1], [0, 1]),
        ([0.1], [2], [0]),
        ([0.1, 0.2], [1, 1], [0, 1]),
        ([0.1, 0.2], [0, 0], [0, 0]),
    ]
    t = np.array([0, 1, 2, 2, 1, 0])
    # Ties across the classes: at 0.6 for P(t >= 1), at 0.5 for P(t >= 2).
    probs = np.array(
        [
            [0.2, 0.1],
            [0.6, 0.5],
            [0.9, 0.8],
            [0.6, 0.5],
            [0.4, 0.3],
            [0.6, 0.5],
        ]
    )
    out = evaluate_rankings(*_pad(lists, 2), list_probs=probs)
    # Hand count, P > 0.5: t >= 1 correct for lists 0, 1, 2, 3 -> 4/6;
    # t >= 2 correct for lists 0, 1, 2, 4, 5 -> 5/6.
    assert out["list_acc_t>=1"] == pytest.approx(4 / 6)
    assert out["list_acc_t>=2"] == pytest.approx(5 / 6)
    for k in (1, 2):
        expected = roc_auc_score(t >= k, probs[:, k - 1])
        assert out[f"list_auc_t>={k}"] == pytest.approx(expected, rel=1e-12)
    # By hand for t >= 2: positives 0.8, 0.5; negatives 0.1, 0.5, 0.3, 0.5.
    # Pairs won: 0.8 beats all 4, 0.5 beats 0.1 and 0.3 and ties two 0.5s -> 4 + 2 + 1 = 7 of 8.
    assert out["list_auc_t>=2"] == pytest.approx(7 / 8)


def test_list_head_single_class_and_one_column():
    lists = [([0.1, 0.2], [1, 0], [0, 1]), ([0.3, 0.2], [2, 1], [0, 1])]
    out = evaluate_rankings(*_pad(lists, 2), list_probs=np.array([[0.9], [0.4]]))
    assert "list_auc_t>=1" in out["not_measured"]  # every list has t >= 1
    assert out["list_acc_t>=1"] == pytest.approx(0.5)
    assert "list_acc_t>=2" not in out and "list_auc_t>=2" not in out


def test_list_head_ignores_columns_after_the_second():
    lists = [([0.1, 0.2], [1, 0], [0, 1]), ([0.3, 0.2], [2, 1], [0, 1])]
    out = evaluate_rankings(*_pad(lists, 2), list_probs=np.full((2, 4), 0.7))
    measured = {key for key in out if key.startswith("list_")}
    assert measured == {"list_acc_t>=1", "list_acc_t>=2", "list_auc_t>=2"}
    # Every list has t >= 1: that AUC has no negative to measure on.
    assert out["not_measured"].startswith("list_auc_t>=1: ")


def _batch():
    return _pad(_three_lists(), 4)


def test_evaluate_rankings_rejects_mismatched_shapes():
    scores, labels, relevance, mask = _batch()
    with pytest.raises(ValueError, match="relevance.*\\(3, 3\\)"):
        evaluate_rankings(scores, labels, relevance[:, :3], mask)
    with pytest.raises(ValueError, match="mask"):
        evaluate_rankings(scores, labels, relevance, mask[:2])
    with pytest.raises(ValueError, match="num_lists"):
        evaluate_rankings(scores[0], labels[0], relevance[0], mask[0])
    with pytest.raises(ValueError, match="list_probs"):
        evaluate_rankings(scores, labels, relevance, mask, list_probs=np.full((2, 2), 0.5))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ks": (1, 0)}, "positive int"),
        ({"gain": "cubic"}, "Unknown gain"),
        ({"list_probs": np.full((3, 2), 2.0)}, "not logits"),
    ],
)
def test_evaluate_rankings_rejects_bad_options(change, message):
    with pytest.raises(ValueError, match=message):
        evaluate_rankings(*_batch(), **change)


def test_evaluate_rankings_rejects_bad_values():
    scores, labels, relevance, mask = _batch()
    with pytest.raises(ValueError, match="bool"):
        evaluate_rankings(scores, labels, relevance, mask.astype(int))
    bad = labels.copy()
    bad[0, 0] = -1
    with pytest.raises(ValueError, match="`labels` must be finite and non-negative"):
        evaluate_rankings(scores, bad, relevance, mask)
    bad = scores.copy()
    bad[1, 0] = np.inf
    with pytest.raises(ValueError, match="scores"):
        evaluate_rankings(bad, labels, relevance, mask)
    bad[1, 0], bad[2, 3] = 0.5, np.nan  # non-finite padding is fine
    assert evaluate_rankings(bad, labels, relevance, mask)["num_lists"] == 3
