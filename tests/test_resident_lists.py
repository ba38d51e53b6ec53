"""Training lists held in memory: the same batches as the streaming pipeline, in the
same order, for every kind of batching; seeded; counted by the run plan."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.conftest import train_config as _config  # noqa: E402
from tfr_rankformer.core.multi_worker import WorkerRole  # noqa: E402
from tfr_rankformer.inputs import batching, data  # noqa: E402
from tfr_rankformer.inputs.manifest import load_manifest
from tfr_rankformer.inputs.resident_lists import resident_bytes  # noqa: E402
from tfr_rankformer.model.feature_normalization import FeatureNormalization  # noqa: E402
from tfr_rankformer.model.table_search import pipeline_normalization  # noqa: E402
from tfr_rankformer.training.run_plan import (  # noqa: E402
    SAFETY_MARGIN,
    MemoryLimitError,
    check_memory,
    plan_run,
)


@pytest.fixture(scope="module")
def explicit(tmp_path_factory):
    """Explicit-label synthetic data: 60 train lists of 1 to ~240 items, some with t = 0."""
    from pipelines.convert_cli import main as convert_main

    out = tmp_path_factory.mktemp("data") / "explicit"
    flags = ["--input", "synthetic", "--output", str(out), "--synthetic-lists", "60"]
    assert convert_main(flags + ["--no-progress", "--log-level", "WARNING"]) == 0
    return str(out)


def _plan(data_dir, manifest, *, cap=None, include_empty=True, one_bucket=False):
    lengths = data.list_lengths(data_dir, manifest, "train", include_empty_lists=include_empty)
    edges = batching.bucket_edges(manifest.split("train").longest_or(1), cap=cap)
    if one_bucket:
        edges = edges[-1:]
    clipped = batching.clipped_lengths(lengths, edges[-1])
    return batching.plan_batches(clipped, edges=edges, batch_items=512, max_lists=8)


def _epochs(data_dir, manifest, plan, *, epochs=2, **options):
    """The batches of ``epochs`` epochs; lists held in memory are normalised as
    ``tfr-train`` normalises them (the compiled search), streamed ones by the layer."""
    layer = FeatureNormalization.from_manifest(manifest, "quantile")
    in_memory = options.get("lists_in_memory", True)
    options = {
        "list_cap": None,
        "include_empty_lists": True,
        "with_list_head": True,
        "seed": 4,
        "normalize": pipeline_normalization(layer) if in_memory else layer,
        **options,
    }
    dataset = data.training_dataset(data_dir, manifest, plan=plan, **options)
    return [
        [
            (inputs["features"].numpy(), inputs["mask"].numpy(), *_targets(targets))
            for inputs, targets in dataset
        ]
        for _ in range(epochs)
    ]


def _targets(targets):
    return targets["scores"].numpy(), targets["list_quality"].numpy()


def _assert_same(ours, theirs):
    assert len(ours) == len(theirs)
    for epoch_ours, epoch_theirs in zip(ours, theirs):
        assert len(epoch_ours) == len(epoch_theirs) > 0
        for batch_ours, batch_theirs in zip(epoch_ours, epoch_theirs):
            for a, b in zip(batch_ours, batch_theirs):
                np.testing.assert_array_equal(a, b)


CASES = {
    "buckets": {},
    "buckets without t = 0": {"include_empty_lists": False},
    "capped and sampled": {"list_cap": 40},
    "capped, first items": {"list_cap": 40, "keep_order": True},
    "padded to the longest": {"pad_to_longest": True},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_memory_serves_the_streaming_batches_in_their_order(explicit, case):
    options = CASES[case]
    manifest = load_manifest(explicit)
    plan = _plan(
        explicit,
        manifest,
        cap=options.get("list_cap"),
        include_empty=options.get("include_empty_lists", True),
        one_bucket=options.get("pad_to_longest", False),
    )
    resident = _epochs(explicit, manifest, plan, lists_in_memory=True, **options)
    streamed = _epochs(explicit, manifest, plan, lists_in_memory=False, **options)
    _assert_same(resident, streamed)
    # Each epoch is shuffled afresh.
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(*resident))


@pytest.mark.parametrize("include_empty", [True, False])
def test_one_bucket_lists_are_held_padded_and_served_alike(dataset, include_empty):
    """The click protocol's lists of at most 16: the padded layout."""
    manifest = load_manifest(dataset)
    plan = _plan(dataset, manifest, cap=16, include_empty=include_empty)
    assert plan.edges == (16,)
    assert data.single_bucket(manifest.split("train"), plan, False) == 16
    options = {"list_cap": 16, "include_empty_lists": include_empty}
    resident = _epochs(dataset, manifest, plan, lists_in_memory=True, **options)
    streamed = _epochs(dataset, manifest, plan, lists_in_memory=False, **options)
    _assert_same(resident, streamed)
    if not include_empty:  # some lists were left out, and none served has t = 0
        assert sum(len(batch[1]) for batch in resident[0]) < manifest.split("train").num_lists
        assert all(np.all(batch[3] > 0) for batch in resident[0])


def test_a_seed_gives_the_same_epochs_and_another_seed_others(explicit):
    manifest = load_manifest(explicit)
    plan = _plan(explicit, manifest)
    first = _epochs(explicit, manifest, plan, seed=7)
    _assert_same(first, _epochs(explicit, manifest, plan, seed=7))
    other = _epochs(explicit, manifest, plan, seed=8)
    assert any(
        a[0].shape != b[0].shape or not np.array_equal(a[0], b[0])
        for a, b in zip(first[0], other[0])
    )


def test_each_worker_holds_and_serves_its_own_shard(explicit):
    manifest = load_manifest(explicit)
    plan = _plan(explicit, manifest, one_bucket=True)
    for index in range(2):
        worker = WorkerRole(index=index, count=2)
        resident = _epochs(explicit, manifest, plan, worker=worker, lists_in_memory=True)
        streamed = _epochs(explicit, manifest, plan, worker=worker, lists_in_memory=False)
        _assert_same(resident, streamed)


def test_the_plan_counts_the_lists_in_memory_and_names_the_flag(dataset, tmp_path):
    manifest = load_manifest(dataset)
    entry = manifest.split("train")
    config = _config(
        dataset, tmp_path / "run", batch_size=None, batch_items=None, lists_in_memory=True
    )
    assert config.lists_in_memory
    run = plan_run(config, manifest, data_dir=dataset)
    # Lists of at most 16 share one bucket: held padded to it.
    expected = resident_bytes(entry.num_lists * 16, entry.num_lists, manifest.num_features)
    assert run.memory.resident == expected > 0
    assert "lists in memory" in run.describe()
    streaming = plan_run(
        dataclasses.replace(config, lists_in_memory=False), manifest, data_dir=dataset
    )
    assert streaming.memory.resident == 0
    # A limit the run fits without its lists in memory, but not with them.
    assert run.streamed_peak == streaming.memory.peak and streaming.streamed_peak is None
    big = dataclasses.replace(run.memory, resident=run.streamed_peak + run.memory.peak)
    limit = int(SAFETY_MARGIN * run.streamed_peak) + 1
    huge = dataclasses.replace(run, memory=big, limit=limit)
    with pytest.raises(MemoryLimitError, match="--lists-in-memory off"):
        check_memory(huge, config)
    # Not offered when the run would not fit with the lists read every epoch either.
    streamed_too_big = dataclasses.replace(huge, streamed_peak=huge.limit)
    with pytest.raises(MemoryLimitError) as refused:
        check_memory(streamed_too_big, config)
    assert "--lists-in-memory" not in str(refused.value)


def test_whole_lists_count_their_items(explicit, tmp_path):
    manifest = load_manifest(explicit)
    entry = manifest.split("train")
    config = _config(
        explicit, tmp_path / "run", batch_size=None, batch_items=2048, lists_in_memory=True
    )
    run = plan_run(config, manifest, data_dir=explicit)
    assert len(run.batches.edges) > 1
    assert run.memory.resident == resident_bytes(
        entry.num_items, entry.num_lists, manifest.num_features
    )
