"""The converter's ELWC shards as ``tf.data`` for training (lists sampled, filtered and
batched by length; inputs ``{"features", "mask"}``, targets ``{"scores"}`` and for list
heads ``{"list_quality": t}``) and for evaluation (whole lists).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping

import tensorflow as tf

from tfr_rankformer.core import elwc_schema
from tfr_rankformer.core.elwc_schema import MASK
from tfr_rankformer.core.multi_worker import WorkerRole
from tfr_rankformer.inputs import batching, list_parsing
from tfr_rankformer.inputs.batching import BatchPlan
from tfr_rankformer.inputs.feature_signal import varies_within_lists, warn_fixed_within_lists
from tfr_rankformer.inputs.list_parsing import (
    INDEX,
    PARSE_BATCH,
    EpochSteps,
    WorkerShard,
    padding_values,
    parsed_lists,
    whole_lists,
)
from tfr_rankformer.inputs.manifest import Manifest, SplitEntry
from tfr_rankformer.inputs.resident_lists import load_lists, resident_batches

logger = logging.getLogger(__name__)

# Streamed lists are cached in memory after the first epoch up to this size.
CACHE_BYTES = 1 << 30


def shard_for_worker(files: list[str], worker: WorkerRole) -> WorkerShard:
    """The part of ``files`` ``worker`` trains on: files dealt round-robin, or with fewer
    files than workers every ``n``-th record (with a warning)."""
    if worker.count == 1:
        return WorkerShard(tuple(files))
    if len(files) >= worker.count:
        mine = files[worker.index :: worker.count]
        names = ", ".join(os.path.basename(f) for f in mine)
        counts = f"{worker.index} of {worker.count} reads {len(mine)} of {len(files)}"
        logger.info(f"worker {counts} files: {names}")
        return WorkerShard(tuple(mine))
    n = worker.count
    logger.warning(
        f"{len(files)} training file(s) for {n} workers: every worker reads all of them and "
        f"keeps every {n}-th record; convert with `tfr-convert --shards N` (N a multiple of "
        f"{n}) to shard by file"
    )
    return WorkerShard(tuple(files), record_stride=worker.count, record_offset=worker.index)


def _list_label(element) -> tf.Tensor:
    """``t = max_i y_i`` over the valid items (0 for a list without any)."""
    labels = tf.where(element[MASK], element[elwc_schema.LABEL], 0.0)
    return tf.reduce_max(labels, axis=-1)


def _to_model_io(element, with_list_head: bool, with_item_levels: bool = False):
    inputs = {elwc_schema.FEATURES: element[elwc_schema.FEATURES], MASK: element[MASK]}
    targets = {"scores": element[elwc_schema.LABEL]}
    if with_item_levels:
        targets["item_levels"] = element[elwc_schema.LABEL]
    if with_list_head:
        targets["list_quality"] = _list_label(element)[..., tf.newaxis]  # [B] -> [B, 1]
    return inputs, targets


def list_lengths(
    data_dir: str, manifest: Manifest, split: str, *, include_empty_lists: bool = True
) -> dict[int, int]:
    """``{items: lists}`` of ``split`` from the manifest, or read once when it has none."""
    lengths = manifest.split(split, data_dir).list_lengths(include_empty_lists=include_empty_lists)
    if lengths is not None:
        return lengths
    logger.info("%s: the manifest has no list-length histogram; reading %s once", data_dir, split)
    return _scan_lengths(manifest.split_files(data_dir, split), include_empty_lists)


def _scan_lengths(files: list[str], include_empty_lists: bool) -> dict[int, int]:
    import tensorflow_ranking as tfr

    spec = {elwc_schema.LABEL: elwc_schema.example_feature_spec(1)[elwc_schema.LABEL]}

    def parse(serialized):
        parsed = tfr.data.parse_from_example_list(
            serialized, example_feature_spec=spec, mask_feature_name=MASK
        )
        labels = tf.where(parsed[MASK], tf.squeeze(parsed[elwc_schema.LABEL], -1), 0.0)
        return tf.reduce_sum(tf.cast(parsed[MASK], tf.int64), -1), tf.reduce_max(labels, -1)

    lengths: dict[int, int] = {}
    dataset = tf.data.TFRecordDataset(files).batch(PARSE_BATCH).map(parse)
    for sizes, list_labels in dataset.as_numpy_iterator():
        for n, t in zip(sizes.tolist(), list_labels.tolist()):
            if include_empty_lists or t > 0:
                lengths[n] = lengths.get(n, 0) + 1
    return lengths


def training_dataset(
    data_dir: str,
    manifest: Manifest | Mapping,
    *,
    split: str = "train",
    plan: BatchPlan,
    list_cap: int | None,
    include_empty_lists: bool,
    with_list_head: bool,
    seed: int,
    with_item_levels: bool = False,
    keep_order: bool = False,
    shuffle_buffer: int = 10_000,
    normalize=None,
    cache_bytes: int = CACHE_BYTES,
    cache_file: str | None = None,
    worker: WorkerRole | None = None,
    pad_to_longest: bool = False,
    lists_in_memory: bool = True,
) -> tf.data.Dataset:
    """Batches of ``(inputs, targets)`` for ``model.fit``, grouped by list length.

    Args:
      plan: the length buckets and their lists per batch over all replicas and workers.
      keep_order: cut long lists to their first items (for positional encodings).
      normalize: applied once to each list's features (``[1, n, d]``), so steps skip it.
      cache_bytes, cache_file: streamed lists are cached in memory up to ``cache_bytes``,
        else in ``cache_file`` if given.
      pad_to_longest: no buckets: batches padded to their longest list (a baseline).
      lists_in_memory: serve every epoch from lists parsed once (``resident_lists``).
    """
    worker, manifest = worker or WorkerRole(), Manifest.coerce(manifest)
    entry = manifest.split(split, data_dir)
    files = shard_for_worker(manifest.split_files(data_dir, split), worker)
    bucket = single_bucket(entry, plan, pad_to_longest)
    finish = functools.partial(
        _to_model_io, with_list_head=with_list_head, with_item_levels=with_item_levels
    )
    steps = EpochSteps(
        include_empty_lists, shuffle_buffer, list_cap, keep_order, seed, pad_to_longest
    )
    if lists_in_memory:
        store = load_lists(files, manifest.num_features, edge=bucket, normalize=normalize)
        features = store.features.numpy()
        varies = varies_within_lists(features, store.starts.numpy(), store.lengths.numpy())
        warn_fixed_within_lists(manifest, varies, data_dir=data_dir)
        batches = resident_batches(store, plan, steps, finish)
    else:
        if bucket is None:
            lists = whole_lists(manifest, files, normalize=normalize)
        else:  # parsed straight to the one bucket's size
            lists = parsed_lists(
                files, manifest.num_features, list_size=bucket, transform=normalize
            )
        size = entry.num_items * (manifest.num_features + 3) * 4
        if size <= cache_bytes or cache_file:  # cached after the first epoch
            lists = lists.cache() if size <= cache_bytes else lists.cache(cache_file)
        batches = _streamed_batches(lists, entry, plan, bucket, steps)
        batches = batches.map(finish, num_parallel_calls=tf.data.AUTOTUNE)
    return _for_fit(batches, worker, plan.steps).prefetch(tf.data.AUTOTUNE)


def single_bucket(entry: SplitEntry, plan: BatchPlan, pad_to_longest: bool) -> int | None:
    """The plan's only bucket's edge if every list of the split fits it whole, else ``None``."""
    if len(plan.edges) != 1 or pad_to_longest:
        return None
    edge = plan.edges[0]
    longest = entry.longest_list
    return edge if longest is not None and longest <= edge else None


def _streamed_batches(lists, entry: SplitEntry, plan: BatchPlan, bucket, steps: EpochSteps):
    """Batches of ``lists`` shuffled afresh each epoch, filtered, sampled and padded as
    ``training_dataset`` says."""
    if not steps.include_empty_lists:
        lists = lists.filter(lambda element: _list_label(element) > 0)
    lists = lists.shuffle(steps.shuffle_buffer, seed=steps.seed, reshuffle_each_iteration=True)
    cap, longest = steps.list_cap, entry.longest_list
    if cap is not None and (longest is None or longest > cap):
        lists = list_parsing.sample_long_lists(
            lists, cap, seed=steps.seed, keep_order=steps.keep_order
        )
    if steps.pad_to_longest:
        return lists.padded_batch(plan.lists_per_batch[0], padding_values=padding_values())
    if bucket is not None:
        return lists.batch(plan.lists_per_batch[0])
    return list_parsing.bucketed(lists, plan)


def _for_fit(batches: tf.data.Dataset, worker: WorkerRole, steps: int) -> tf.data.Dataset:
    """``batches`` for ``fit``: not auto-sharded in a multi-worker job, else of ``steps``."""
    if worker.multi_worker:
        # Sharded where the files are read: auto-sharding may read all and drop records.
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        return batches.with_options(options)
    return batches.apply(tf.data.experimental.assert_cardinality(steps))


def evaluation_dataset(
    data_dir: str,
    manifest: Manifest | Mapping,
    *,
    split: str,
    batch_size: int,
    batch_items: int | None = None,
    by_length: bool = True,
) -> tf.data.Dataset:
    """Batches of whole lists with their ``index`` in file order: by length bucket, at most
    ``batch_size`` lists and about ``batch_items`` padded items (``by_length``), else
    ``batch_size`` lists in file order."""
    manifest = Manifest.coerce(manifest)
    lists = whole_lists(manifest, manifest.split_files(data_dir, split))
    lists = lists.enumerate().map(lambda i, element: {**element, INDEX: i})
    if not by_length:
        padding = {**padding_values(), INDEX: tf.constant(-1, tf.int64)}
        return lists.padded_batch(batch_size, padding_values=padding).prefetch(tf.data.AUTOTUNE)
    edges = batching.bucket_edges(manifest.split(split, data_dir).longest_or(1))
    plan = batching.plan_batches(
        {},
        edges=edges,
        batch_items=batch_items or batch_size * edges[-1],
        max_lists=batch_size,
    )
    return list_parsing.bucketed(lists, plan).prefetch(tf.data.AUTOTUNE)
