"""Reading the converter's ELWC shards into ``tf.data`` for training and evaluation.

Records are parsed in batches with TF-Ranking's ELWC parser (``tfr.data``),
then handled one list at a time:

* training: lists are padded or cut to a fixed ``list_size``; a longer list
  has its items shuffled first, so the kept items are a random sample, not the
  file's first ones; lists may be filtered by their list label
  ``t = max_i y_i``; batches are shuffled;
* evaluation: every item of every list is kept (lists are padded to the
  longest list of their batch), so no list is silently cut.

In a multi-worker job each worker reads its own part of the training split
(``shard_for_worker``): whole files when there are enough of them, else every
``count``-th record.

Model inputs are ``{"features": [B, L, d] float32, "mask": [B, L] bool}``;
targets are ``{"scores": [B, L] float32}`` (padding items carry -1, which
TF-Ranking's losses ignore) and, for models with a list head,
``{"list_quality": [B, 1] float32}`` holding ``t``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os

import tensorflow as tf

from tfr_rankformer import elwc_schema
from tfr_rankformer.multi_worker import WorkerRole

__all__ = [
    "MASK",
    "load_manifest",
    "split_files",
    "WorkerShard",
    "shard_for_worker",
    "label_levels",
    "parsed_lists",
    "training_dataset",
    "evaluation_dataset",
    "count_training_lists",
]

logger = logging.getLogger(__name__)

MASK = "mask"
_PARSE_BATCH = 256


def load_manifest(data_dir: str) -> dict:
    """The ``manifest.json`` of a converted dataset.

    Raises:
      FileNotFoundError: naming the directory and the command that makes it.
      ValueError: naming the file (and line and column) when it is not JSON
        or lacks what every reader needs.
    """
    path = os.path.join(data_dir, "manifest.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{data_dir} holds no manifest.json: point --data at the output of one "
            "tfr-convert run (or one of its FoldN/ directories)"
        )
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path}:{e.lineno}:{e.colno}: the manifest is not valid JSON ({e.msg}); "
            "rerun tfr-convert"
        ) from None
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: the manifest is not UTF-8 text (byte {e.start}); rerun tfr-convert"
        ) from None
    _check_manifest(path, manifest)
    return manifest


def _check_manifest(path: str, manifest) -> None:
    """The fields every reader relies on, with their types."""
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: the manifest is not a JSON object; rerun tfr-convert")
    for key, kind in (("num_features", int), ("splits", dict)):
        if not isinstance(manifest.get(key), kind):
            raise ValueError(
                f"{path}: the manifest's {key!r} is missing or not a JSON "
                f"{'integer' if kind is int else 'object'}; rerun tfr-convert"
            )
    for split, entry in manifest["splits"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
            raise ValueError(f"{path}: split {split!r} lists no 'files' object; rerun tfr-convert")


def split_files(data_dir: str, manifest: dict, split: str) -> list[str]:
    """The TFRecord shards of ``split``, as listed in the manifest."""
    if split not in manifest["splits"]:
        raise ValueError(f"{data_dir} has no {split!r} split; it has {sorted(manifest['splits'])}")
    return [os.path.join(data_dir, name) for name in manifest["splits"][split]["files"]]


@dataclasses.dataclass(frozen=True)
class WorkerShard:
    """The part of a split that one worker reads.

    Attributes:
      files: the TFRecord files it opens.
      record_stride: it keeps every ``record_stride``-th record of them (1: all).
      record_offset: the first record it keeps, below ``record_stride``.
    """

    files: tuple[str, ...]
    record_stride: int = 1
    record_offset: int = 0


def shard_for_worker(files: list[str], worker: WorkerRole) -> WorkerShard:
    """The disjoint part of ``files`` that ``worker`` trains on.

    Files are dealt round-robin (worker ``i`` of ``n`` opens files ``i``,
    ``i + n``, ...), so no worker reads another's records. With fewer files
    than workers every worker reads all of them and keeps every ``n``-th record,
    which spends ``n`` times the reading and parsing; a warning says so.
    """
    if worker.count == 1:
        return WorkerShard(tuple(files))
    if len(files) >= worker.count:
        mine = files[worker.index :: worker.count]
        logger.info(
            "worker %d of %d reads %d of %d files: %s",
            worker.index,
            worker.count,
            len(mine),
            len(files),
            ", ".join(os.path.basename(f) for f in mine),
        )
        return WorkerShard(tuple(mine))
    logger.warning(
        "%d training file(s) for %d workers: every worker reads all of them and keeps every "
        "%d-th record; convert with `tfr-convert --shards N` (N a multiple of %d) to shard "
        "by file",
        len(files),
        worker.count,
        worker.count,
        worker.count,
    )
    return WorkerShard(tuple(files), record_stride=worker.count, record_offset=worker.index)


def label_levels(manifest: dict) -> int:
    """Levels of the list label above 0: the highest training label value.

    With simulated clicks the labels are 0, 1 and the purchase label, and the
    list head predicts ``P(t >= k)`` for ``k = 1 .. purchase label``.
    """
    if manifest.get("label_kind") == "simulated_implicit":
        return int(manifest["parameters"]["clicks"]["purchase_label"])
    return int(manifest["max_relevance"])


def parsed_lists(
    files: list[str] | WorkerShard,
    num_features: int,
    *,
    list_size: int | None,
    shuffle_items: bool,
    seed: int,
    transform=None,
) -> tf.data.Dataset:
    """One element per list: ``features [L, d]``, ``mask [L]``, ``label [L]``, ``relevance [L]``.

    ``files`` are read whole, or a ``WorkerShard`` of them. With ``list_size``
    every list is padded or cut to it (after shuffling its items when
    ``shuffle_items``); with ``None`` each parse batch is padded to its longest
    list and nothing is cut. ``transform`` maps the features of a parse batch
    (``[B, L, d]``), e.g. the model's normalisation.
    """
    import tensorflow_ranking as tfr

    def parse(serialized):
        parsed = tfr.data.parse_from_example_list(
            serialized,
            list_size=list_size,
            context_feature_spec=elwc_schema.context_feature_spec(),
            example_feature_spec=elwc_schema.example_feature_spec(num_features),
            mask_feature_name=MASK,
            shuffle_examples=shuffle_items,
            seed=seed,
        )
        features = parsed[elwc_schema.FEATURES]
        return {
            elwc_schema.FEATURES: transform(features) if transform is not None else features,
            MASK: parsed[MASK],
            # [B, L, 1] -> [B, L]
            elwc_schema.LABEL: tf.squeeze(parsed[elwc_schema.LABEL], axis=-1),
            elwc_schema.RELEVANCE: tf.squeeze(parsed[elwc_schema.RELEVANCE], axis=-1),
            elwc_schema.QID: tf.squeeze(parsed[elwc_schema.QID], axis=-1),
        }

    shard = files if isinstance(files, WorkerShard) else WorkerShard(tuple(files))
    dataset = tf.data.TFRecordDataset(list(shard.files))
    if shard.record_stride > 1:
        dataset = dataset.shard(shard.record_stride, shard.record_offset)
    dataset = dataset.batch(_PARSE_BATCH).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.unbatch()


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


def training_dataset(
    data_dir: str,
    manifest: dict,
    *,
    split: str = "train",
    batch_size: int,
    list_size: int,
    include_empty_lists: bool,
    with_list_head: bool,
    seed: int,
    with_item_levels: bool = False,
    keep_order: bool = False,
    shuffle_buffer: int = 10_000,
    normalize=None,
    cache_bytes: int = 2 << 30,
    worker: WorkerRole | None = None,
) -> tf.data.Dataset:
    """Batches of ``(inputs, targets)`` for ``model.fit``.

    Args:
      data_dir: a converted dataset.
      manifest: its manifest.
      split: the split to read.
      batch_size: lists per global batch. Under a ``tf.distribute`` strategy
        ``fit`` splits every batch among the replicas, so each of ``n`` workers
        trains on ``batch_size / n`` lists per step.
      list_size: items per list (padded or sampled).
      include_empty_lists: keep lists whose list label ``t`` is 0.
      with_list_head: add the ``list_quality`` target.
      seed: seed of the list and item shuffles.
      with_item_levels: add the ``item_levels`` target (the labels again), for
        the item-level ordinal loss.
      keep_order: cut a longer list to its first ``list_size`` items instead of
        a random sample, keeping the input order (for positional encodings).
      shuffle_buffer: lists held for shuffling.
      normalize: applied to the features once per list (``[B, L, d]``), e.g.
        the model's normalisation layer, so training steps skip it.
      cache_bytes: when no list is ever resampled (none is longer than
        ``list_size``, or they are cut in order), the parsed lists are kept in
        memory after the first epoch if they take at most this many bytes.
      worker: this worker's place in a multi-worker job (default: the only
        worker); it reads only its ``shard_for_worker`` of the split.
    """
    worker = worker or WorkerRole()
    entry = manifest["splits"][split]
    resampled = entry.get("longest_list", list_size + 1) > list_size
    size = entry["num_lists"] * list_size * (manifest["num_features"] + 3) * 4
    lists = parsed_lists(
        shard_for_worker(split_files(data_dir, manifest, split), worker),
        manifest["num_features"],
        list_size=list_size,
        shuffle_items=resampled and not keep_order,
        seed=seed,
        transform=normalize,
    )
    if (not resampled or keep_order) and size <= cache_bytes:
        lists = lists.cache()
    if not include_empty_lists:
        lists = lists.filter(lambda element: _list_label(element) > 0)
    lists = lists.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    batches = lists.batch(batch_size).map(
        lambda element: _to_model_io(element, with_list_head, with_item_levels),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    if worker.multi_worker:
        # The shard is cut above, explicitly, rather than by tf.distribute's
        # auto-sharding: that rewrite falls back silently to reading everything
        # and dropping records at the end of the pipeline when it cannot shard
        # by file. With it off, fit still re-batches each worker's batches of
        # `batch_size` into per-replica batches, so a step spans `batch_size`
        # lists over all workers.
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        batches = batches.with_options(options)
    return batches.prefetch(tf.data.AUTOTUNE)


def evaluation_dataset(
    data_dir: str, manifest: dict, *, split: str, batch_size: int
) -> tf.data.Dataset:
    """Batches of whole lists, in file order, with everything evaluation needs.

    Each element is a dict with ``features``, ``mask``, ``label`` and
    ``relevance``, padded to the longest list of the batch.
    """
    lists = parsed_lists(
        split_files(data_dir, manifest, split),
        manifest["num_features"],
        list_size=None,
        shuffle_items=False,
        seed=0,
    )
    padding = {
        elwc_schema.FEATURES: 0.0,
        MASK: False,
        elwc_schema.LABEL: elwc_schema.PADDING_LABEL,
        elwc_schema.RELEVANCE: elwc_schema.PADDING_LABEL,
        elwc_schema.QID: tf.constant(-1, tf.int64),
    }
    return lists.padded_batch(batch_size, padding_values=padding).prefetch(tf.data.AUTOTUNE)


def count_training_lists(manifest: dict, split: str, *, include_empty_lists: bool) -> int:
    """Lists one training epoch sees, from the manifest's list-label histogram."""
    entry = manifest["splits"][split]
    empty = int(entry["list_label_histogram"].get("0", 0))
    return entry["num_lists"] - (0 if include_empty_lists else empty)
