"""Length-bucketed batches: plans, every item once per epoch, the paper's batches kept,
scores independent of the bucket, the list cap counted, evaluation order kept."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import SMALL  # noqa: E402
from tests.conftest import train_config as _config  # noqa: E402
from tfr_rankformer.inputs import (
    batching,
    data,  # noqa: E402
)
from tfr_rankformer.inputs.manifest import load_manifest
from tfr_rankformer.model.model_config import ModelConfig  # noqa: E402
from tfr_rankformer.model.models import build_model, ranker_of  # noqa: E402
from tfr_rankformer.ranking.evaluation import predict_lists  # noqa: E402
from tfr_rankformer.training.run_plan import plan_run  # noqa: E402

# === The plan (no TensorFlow) ===


def test_bucket_edges_grow_by_half_octaves_and_end_at_the_longest_or_the_cap():
    assert batching.bucket_edges(720) == (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 720)
    assert batching.bucket_edges(1251)[-3:] == (768, 1024, 1251)
    assert batching.bucket_edges(720, cap=200) == (16, 24, 32, 48, 64, 96, 128, 192, 200)
    # The click protocol's lists of at most 16 items: one bucket.
    assert batching.bucket_edges(16, cap=16) == (16,)
    assert batching.bucket_edges(9) == (9,)
    with pytest.raises(ValueError, match="longest"):
        batching.bucket_edges(0)


def test_plan_budget_fixed_lists_and_attention_cap():
    edges = batching.bucket_edges(1251)
    lengths = {"10": 100, "120": 300, "1251": 3}
    plan = batching.plan_batches(lengths, edges=edges, batch_items=32768, max_lists=2048)
    sizes = dict(zip(plan.edges, plan.lists_per_batch))
    assert sizes[16] == 2048 and sizes[128] == 256 and sizes[256] == 128
    # Past 256 items the attention budget (32768 x 256 entries) binds: 5 lists of 1,251.
    assert sizes[512] == 32 and sizes[1251] == 5
    counts = dict(zip(plan.edges, plan.counts))
    assert counts[16] == 100 and counts[128] == 300 and counts[1251] == 3
    assert plan.lists == 403 and plan.steps == 1 + 2 + 1
    fixed = batching.plan_batches(lengths, edges=edges, lists_per_batch=64)
    assert set(fixed.lists_per_batch) == {64} and fixed.steps == 2 + 5 + 1
    with pytest.raises(ValueError, match="longer than the last bucket"):
        batching.plan_batches({"2000": 1}, edges=edges, lists_per_batch=8)


def test_clipped_lengths_moves_long_lists_to_the_cap():
    assert batching.clipped_lengths({"5": 2, "300": 3, "200": 1}, 200) == {5: 2, 200: 4}
    assert batching.clipped_lengths({"5": 2, "300": 3}, None) == {5: 2, 300: 3}


# === The tf.data pipeline ===


@pytest.fixture(scope="module")
def explicit(tmp_path_factory):
    """Explicit-label synthetic data: 120 train lists of 1 to ~240 items."""
    from pipelines.convert_cli import main as convert_main

    out = tmp_path_factory.mktemp("data") / "explicit"
    flags = ["--input", "synthetic", "--output", str(out), "--synthetic-lists", "120"]
    assert convert_main(flags + ["--no-progress", "--log-level", "WARNING"]) == 0
    return str(out)


def _file_items(data_dir, manifest, split="train", with_labels=False):
    """``{qid: sorted item rows}`` of a split (with the labels: ``(rows, labels)``), read
    in file order without buckets."""
    out = {}
    for batch in data.evaluation_dataset(
        data_dir, manifest, split=split, batch_size=32, by_length=False
    ):
        for qid, x, m, y in zip(
            batch["qid"].numpy(), batch["features"].numpy(), batch["mask"], batch["label"]
        ):
            rows = sorted(map(tuple, x[m.numpy()].round(5).tolist()))
            out[int(qid)] = (rows, y.numpy()[m.numpy()].tolist()) if with_labels else rows
    return out


def _epoch_items(dataset):
    """Every valid item row of one epoch, with the batch shapes."""
    rows, shapes = collections.Counter(), []
    for inputs, targets in dataset:
        x, m = inputs["features"].numpy(), inputs["mask"].numpy()
        shapes.append((x.shape[0], x.shape[1], int(m.sum(axis=1).max())))
        rows.update(map(tuple, x[m].round(5).tolist()))
        assert (targets["scores"].numpy()[~m] == -1).all()
    return rows, shapes


@pytest.mark.parametrize("batch_items, include_empty", [(2048, True), (None, True), (2048, False)])
def test_every_item_is_seen_exactly_once_per_epoch(explicit, tmp_path, batch_items, include_empty):
    manifest = load_manifest(explicit)
    config = _config(
        explicit,
        tmp_path,
        batch_size=16,
        batch_items=batch_items,
        include_empty_lists=include_empty,
    )
    run = plan_run(config, manifest, data_dir=explicit)
    assert run.cap is None and run.sampled_out == 0
    expected = collections.Counter()
    lists = _file_items(explicit, manifest, with_labels=True)
    for rows, labels in lists.values():
        if include_empty or max(labels) > 0:
            expected.update(rows)
    assert run.batches.lists == sum(include_empty or max(y) > 0 for _, y in lists.values())
    dataset = data.training_dataset(
        explicit,
        manifest,
        plan=run.batches,
        list_cap=None,
        include_empty_lists=include_empty,
        with_list_head=True,
        seed=1,
    )
    for _ in range(2):  # the cache serves the second epoch
        rows, shapes = _epoch_items(dataset)
        assert rows == expected
        assert len(shapes) == run.batches.steps
        edges = set(run.batches.edges)
        for lists, padded, longest in shapes:
            assert padded in edges and longest <= padded
            # A list lands in the smallest bucket that holds it.
            assert padded == min(e for e in run.batches.edges if e >= longest)
            assert lists <= run.batches.lists_per_batch[run.batches.edges.index(padded)]
    if batch_items:
        assert max(lists * padded for lists, padded, _ in shapes) <= batch_items


@pytest.mark.parametrize("batch_size", [None, 256])
def test_the_click_protocol_keeps_its_batches(dataset, tmp_path, batch_size):
    """Lists of at most 16 items, 2048 (or the user's 256) per batch: the batches of
    shuffling the lists and batching them, as before buckets existed."""
    manifest = load_manifest(dataset)
    config = _config(dataset, tmp_path, batch_size=batch_size, batch_items=None)
    lists = batch_size or 2048
    assert (config.batch_size, config.batch_items) == (lists, None if batch_size else 32768)
    run = plan_run(config, manifest, data_dir=dataset)
    assert run.batches.edges == (16,) and run.batches.lists_per_batch == (lists,)
    ours = data.training_dataset(
        dataset,
        manifest,
        plan=run.batches,
        list_cap=run.cap,
        include_empty_lists=True,
        with_list_head=False,
        seed=5,
    )
    files = manifest.split_files(dataset, "train")
    before = (
        data.parsed_lists(files, manifest.num_features, list_size=16)
        .shuffle(10_000, seed=5, reshuffle_each_iteration=True)
        .batch(lists)
    )
    pairs = list(zip(ours, before))
    assert len(pairs) == run.batches.steps == -(-900 // lists)
    for (inputs, targets), old in pairs:
        np.testing.assert_array_equal(inputs["features"].numpy(), old["features"].numpy())
        np.testing.assert_array_equal(inputs["mask"].numpy(), old["mask"].numpy())
        np.testing.assert_array_equal(targets["scores"].numpy(), old["label"].numpy())


def test_parse_calls_of_any_size_give_the_same_lists(dataset, monkeypatch):
    """Lists of 16 are parsed 512 a call (``parse_batch``); 64 a call gave the same lists."""
    from tfr_rankformer.inputs import list_parsing

    manifest = load_manifest(dataset)
    files = manifest.split_files(dataset, "train")

    def lists():
        parsed = data.parsed_lists(files, manifest.num_features, list_size=16)
        return [{k: v.numpy() for k, v in element.items()} for element in parsed]

    assert list_parsing.parse_batch(16) == 512 and list_parsing.parse_batch(None) == 64
    large = lists()
    monkeypatch.setattr(list_parsing, "PARSE_ITEMS", 16)
    assert list_parsing.parse_batch(16) == 64
    small = lists()
    assert len(large) == len(small) == 900
    for a, b in zip(large, small):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def test_scores_do_not_depend_on_the_bucket():
    """A list padded to 16 or to 96 items, beside other lists, gets the same scores."""
    tf.keras.utils.set_random_seed(0)
    from tests.conftest import identity_manifest

    model = ranker_of(
        build_model("rankformer", identity_manifest(3), ModelConfig(**SMALL), levels=2)
    )
    rng = np.random.default_rng(0)
    items = rng.normal(size=(7, 3)).astype(np.float32)

    def scores(padded, neighbours):
        x = np.zeros((1 + neighbours, padded, 3), np.float32)
        m = np.zeros((1 + neighbours, padded), bool)
        x[0, :7], m[0, :7] = items, True
        x[1:] = rng.normal(size=x[1:].shape)
        m[1:, : padded // 2] = True
        out = model({"features": tf.constant(x), "mask": tf.constant(m)}, training=False)
        return out["scores"].numpy()[0, :7], out["list_quality"].numpy()[0]

    small, small_list = scores(16, 0)
    large, large_list = scores(96, 5)
    np.testing.assert_allclose(small, large, atol=1e-5)
    np.testing.assert_allclose(small_list, large_list, atol=1e-5)


def test_the_list_cap_samples_long_lists_afresh_and_counts_what_it_leaves_out(explicit, tmp_path):
    manifest = load_manifest(explicit)
    lengths = data.list_lengths(explicit, manifest, "train")
    config = _config(explicit, tmp_path, list_size=40, batch_size=None, batch_items=4096)
    run = plan_run(config, manifest, data_dir=explicit)
    assert run.cap == 40 and run.batches.edges[-1] == 40
    assert run.sampled_out == sum((n - 40) * c for n, c in lengths.items() if n > 40) > 0
    assert run.items == sum(min(n, 40) * c for n, c in lengths.items())

    def capped():
        return data.training_dataset(
            explicit,
            manifest,
            plan=run.batches,
            list_cap=40,
            include_empty_lists=True,
            with_list_head=False,
            seed=2,
        )

    dataset = capped()
    first, _ = _epoch_items(dataset)
    second, _ = _epoch_items(dataset)
    assert sum(first.values()) == sum(second.values()) == run.items
    assert first != second  # a fresh sample each epoch
    again, _ = _epoch_items(capped())
    assert again == first  # the same seed, the same samples


def test_scanned_lengths_equal_the_manifest_histogram(explicit):
    manifest = load_manifest(explicit)
    for include in (True, False):
        from_manifest = data.list_lengths(explicit, manifest, "train", include_empty_lists=include)
        entry = dataclasses.replace(manifest.splits["train"], list_length_histogram=None)
        old = dataclasses.replace(manifest, splits={**manifest.splits, "train": entry})
        assert data.list_lengths(explicit, old, "train", include_empty_lists=include) == (
            from_manifest
        )


def test_evaluation_by_length_keeps_file_order_and_bounds_batches(explicit, trained):
    from tfr_rankformer.training.training_setup import load_run

    manifest = load_manifest(explicit)
    model = load_run(trained[0])[2]
    # The trained run has 136 features, like the explicit data.
    by_length = data.evaluation_dataset(
        explicit, manifest, split="test", batch_size=64, batch_items=1024
    )
    for batch in by_length:
        m = batch["mask"].numpy()
        assert m.shape[0] * m.shape[1] <= max(1024, m.shape[1])
    ordered = predict_lists(model, by_length)
    plain = predict_lists(
        model,
        data.evaluation_dataset(explicit, manifest, split="test", batch_size=64, by_length=False),
    )
    np.testing.assert_array_equal(ordered["mask"], plain["mask"])
    np.testing.assert_array_equal(ordered["label"], plain["label"])
    valid = plain["mask"]
    np.testing.assert_allclose(ordered["scores"][valid], plain["scores"][valid], atol=1e-4)


def test_prediction_batches_lists_by_length_and_keeps_their_order():
    from tfr_rankformer.serving import prediction

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 1251, size=300).tolist()
    seen = []

    def score(batch):
        seen.append([len(item) for item in batch])
        return [f"scored {item[0]}" for item in batch]

    items = [[i] * n for i, n in enumerate(lengths)]
    out = list(prediction._by_length(items, 32, len, score, max_items=8192))
    assert out == [f"scored {i}" for i in range(300)]
    assert sorted(n for batch in seen for n in batch) == sorted(lengths)
    for batch in seen:
        width = max(batch)
        assert len(batch) <= 32
        assert len(batch) == 1 or len(batch) * width <= 8192
        assert len(batch) == 1 or len(batch) * width * width <= 8192 * 256
    # Sorted windows: far less padding than batches of 32 in input order.
    padded = sum(len(b) * max(b) for b in seen)
    in_order = sum(32 * max(lengths[i : i + 32]) for i in range(0, 300, 32))
    assert padded < 0.6 * in_order
