"""A training run's plan before it starts: list cap, buckets, batches, steps and peak
memory; a run that cannot fit is refused with the flags that would make it fit.
"""

from __future__ import annotations

import dataclasses

from tfr_rankformer.core import model_families
from tfr_rankformer.core.multi_worker import WorkerRole
from tfr_rankformer.inputs import batching, data
from tfr_rankformer.inputs.list_parsing import PARSE_BATCH, PARSE_ITEMS
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.inputs.resident_lists import resident_bytes
from tfr_rankformer.training.memory_estimate import (
    RUNTIME_BYTES,
    MemoryEstimate,
    available_memory,
    format_gb,
    forward_bytes,
    model_shape,
    step_bytes,
)
from tfr_rankformer.training.train_config import TrainConfig

SHUFFLE_BUFFER = 10_000
# The shuffle buffer holds about this many items (10,000 lists of the paper's 16).
SHUFFLE_ITEMS = SHUFFLE_BUFFER * 16
_ROW = 4  # bytes per float

# A run is refused when the estimate times this (pools, transient copies) exceeds the limit.
SAFETY_MARGIN = 1.3


class MemoryLimitError(ValueError):
    """A run whose estimated peak memory exceeds what the machine has."""


def list_cap(config: TrainConfig, manifest: Manifest) -> int | None:
    """Items a training list keeps at most: ``--list-size``, else the click simulation's
    sample size, else the model's ``slate_size`` (``None``: whole lists)."""
    if config.list_size is not None:
        return config.list_size
    if manifest.clicks is not None:
        return int(manifest.clicks["sample_size"])
    return model_families.get_model(config.model).slate_size


def shuffle_lists(manifest: Manifest) -> int:
    """Lists the training shuffle buffer holds: about ``SHUFFLE_ITEMS`` items.

    >>> train = {"num_lists": 18_900, "num_items": 2_279_173}
    >>> shuffle_lists(Manifest.coerce({"splits": {"train": train}}))
    1326
    """
    entry = manifest.split("train")
    mean = max(1.0, entry.num_items / max(1, entry.num_lists))
    return max(1, min(SHUFFLE_BUFFER, int(SHUFFLE_ITEMS / mean)))


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """A training run's batches and memory.

    Attributes:
      batches: the training split's buckets and lists per batch.
      items: the items an epoch trains on (after the cap, before padding).
      sampled_out: items per epoch that the cap leaves out.
      eval_batch_items: padded items per evaluation batch.
      memory: the peak-memory estimate.
      limit: the memory the run may use (bytes; ``None``: unknown).
      unit: what an item is (``documents`` for text lists).
      streamed_peak: the peak with ``--lists-in-memory off`` (``None``: it is off).
    """

    batches: batching.BatchPlan
    cap: int | None
    items: int
    sampled_out: int
    eval_batch_items: int
    memory: MemoryEstimate
    limit: int | None
    unit: str = "items"
    streamed_peak: int | None = None

    @property
    def padding(self) -> float:
        """Padded items over real items, minus one (0.2: padding adds 20%)."""
        return self.batches.padded_items() / max(1, self.items) - 1

    def describe(self) -> str:
        b = self.batches
        unit = self.unit
        kept = (
            f"lists cut to {self.cap} {unit} leave out {self.sampled_out:,} {unit}/epoch"
            if self.sampled_out
            else "whole lists"
        )
        available = f" of {format_gb(self.limit)} available" if self.limit else ""
        return (
            f"{b.lists:,} lists, {b.steps:,} batches/epoch by length ({b.describe(unit)}); "
            f"{kept}; padding adds {100 * self.padding:.0f}%; "
            f"memory {self.memory.describe()}{available}"
        )


def batch_plan(
    config, lengths: dict, longest: int, cap: int | None, *, one_bucket: bool, item_tokens: int = 1
) -> batching.BatchPlan:
    """The training split's batches of ``lengths`` (``{length: count}``) cut at ``cap``:
    ``--batch-size`` lists or as many as fit ``--batch-items`` (``item_tokens`` an item)."""
    edges = batching.bucket_edges(longest, cap=cap)
    edges = edges[-1:] if one_bucket else edges
    clipped = batching.clipped_lengths(lengths, edges[-1])
    if config.batch_items is None:
        return batching.plan_batches(clipped, edges=edges, lists_per_batch=config.batch_size)
    items = max(1, config.batch_items // item_tokens)
    return batching.plan_batches(
        clipped, edges=edges, batch_items=items, max_lists=config.batch_size
    )


def largest_step(plan: batching.BatchPlan, step_bytes) -> tuple[int, tuple[int, int]]:
    """The largest step's bytes (``step_bytes(lists, length)``) and ``(lists, length)``."""
    used = [(min(b, c), e) for b, e, c in zip(plan.lists_per_batch, plan.edges, plan.counts) if c]
    used = used or [(plan.lists_per_batch[0], plan.edges[0])]
    return max(((step_bytes(b, e), (b, e)) for b, e in used), key=lambda sized: sized[0])


def _pipeline_bytes(manifest: Manifest, plan: batching.BatchPlan, *, resident: bool) -> int:
    """Cache, shuffle buffer, partly filled windows, parse batches and prefetch."""
    entry = manifest.split("train")
    row = (manifest.num_features + 3) * _ROW
    mean = entry.num_items / max(1, entry.num_lists)
    shuffled = min(shuffle_lists(manifest), entry.num_lists)
    if resident:  # no cache; the shuffle buffer holds int64 list ids
        cache, shuffle = 0, shuffled * 8
    else:
        cache = entry.num_items * row if entry.num_items * row <= data.CACHE_BYTES else 0
        shuffle = shuffled * mean * row
    windows = sum(min(b, c) * e for b, e, c in zip(plan.lists_per_batch, plan.edges, plan.counts))
    lists, length = plan.largest_batch()
    parse = 4 * max(PARSE_BATCH * entry.longest_or(1), PARSE_ITEMS)
    return int(cache + shuffle + (windows + 2 * lists * length + parse) * row)


def _resident_bytes(config: TrainConfig, manifest: Manifest, plan: batching.BatchPlan) -> int:
    """What ``inputs.resident_lists`` holds of the training split (0: streamed)."""
    if not config.lists_in_memory:
        return 0
    entry = manifest.split("train")
    edge = data.single_bucket(entry, plan, not config.length_buckets)
    items = entry.num_lists * edge if edge is not None else entry.num_items
    return resident_bytes(items, entry.num_lists, manifest.num_features)


def plan_run(
    config: TrainConfig, manifest: Manifest, *, data_dir: str, worker: WorkerRole | None = None
) -> RunPlan:
    """Plans ``config``'s run on ``data_dir``; ``ListLimitError`` for a list the model
    cannot take, in any split."""
    worker = worker or WorkerRole()
    limit = config.architecture.list_limit()
    if limit is not None:
        split = max(manifest.splits, key=lambda name: manifest.splits[name].longest_or(1))
        where = f"the {split!r} split of {data_dir}"
        limit.check(manifest.splits[split].longest_or(1), where=where)
    include_empty = config.training_includes_empty_lists()
    lengths = data.list_lengths(data_dir, manifest, "train", include_empty_lists=include_empty)
    cap = list_cap(config, manifest)
    longest = manifest.split("train", data_dir).longest_or(max(lengths, default=1))
    # One bucket for several workers: they must take the same number of steps.
    one_bucket = worker.multi_worker or not config.length_buckets
    plan = batch_plan(config, lengths, longest, cap, one_bucket=one_bucket)
    edge = plan.edges[-1]
    sampled_out = sum((n - edge) * c for n, c in lengths.items() if n > edge)
    eval_items = config.evaluation_batch_items()
    memory = estimate_memory(config, manifest, plan, cap=cap, eval_batch_items=eval_items)
    streamed = None
    if config.lists_in_memory:  # what --lists-in-memory off would need, for the refusal
        reading = dataclasses.replace(config, lists_in_memory=False)
        streamed = estimate_memory(reading, manifest, plan, cap=cap, eval_batch_items=eval_items)
    limit = int(config.memory_limit * 2**30) if config.memory_limit else available_memory()
    items = sum(min(n, edge) * c for n, c in lengths.items())
    streamed_peak = streamed.peak if streamed else None
    return RunPlan(
        plan, cap, items, sampled_out, eval_items, memory, limit, streamed_peak=streamed_peak
    )


def estimate_memory(
    config: TrainConfig, manifest: Manifest, plan: batching.BatchPlan, *, cap, eval_batch_items: int
) -> MemoryEstimate:
    """The run's peak memory by part (see ``memory_estimate``)."""
    d = manifest.num_features
    shape = model_shape(config.model, config.architecture, d)
    step, batch = largest_step(
        plan, lambda b, e: step_bytes(shape, lists=b, length=e, num_features=d)
    )
    evaluation = 0
    for entry in manifest.splits.values():
        longest = entry.longest_or(1)
        eval_plan = batching.plan_batches(
            {},
            edges=batching.bucket_edges(longest),
            batch_items=eval_batch_items,
            max_lists=config.eval_batch_size,
        )
        forward = max(
            forward_bytes(shape, lists=b, length=e, num_features=d)
            for b, e in zip(eval_plan.lists_per_batch, eval_plan.edges)
        )
        predictions = entry.num_lists * longest * 4 * _ROW
        evaluation = max(evaluation, forward + predictions)
    resident = _resident_bytes(config, manifest, plan)
    pipeline = _pipeline_bytes(manifest, plan, resident=resident > 0)
    return MemoryEstimate(RUNTIME_BYTES, pipeline, step, evaluation, batch, resident)


def check_memory(
    run: RunPlan, config: TrainConfig, *, item_tokens: int = 1, shorter_lists: int = 256
) -> None:
    """Raises ``MemoryLimitError`` when the estimate exceeds the limit, naming flags that fit
    (``item_tokens``: an item's count in ``--batch-items``; ``shorter_lists``: a
    ``--list-size`` to suggest)."""
    if run.limit is None or run.memory.peak * SAFETY_MARGIN <= run.limit:
        return
    memory = run.memory
    fixed = memory.runtime + memory.pipeline
    room = run.limit / SAFETY_MARGIN - fixed - memory.resident
    hints = []
    if memory.step > room > 0:
        # A step's memory is about proportional to its items.
        share = 0.9 * room / memory.step
        lists, length = memory.step_batch
        if config.batch_items is not None:
            hints.append(f"--batch-items {max(1, int(lists * length * item_tokens * share))}")
        else:
            hints.append(f"--batch-size {max(1, int(lists * share))}")
    if memory.evaluation > room > 0:
        share = 0.9 * room / memory.evaluation
        hints.append(f"--eval-batch-size {max(1, int(config.eval_batch_size * share))}")
    if run.batches.edges[-1] > shorter_lists:
        hints.append(f"--list-size {shorter_lists} (samples longer lists)")
    if run.streamed_peak is not None and run.streamed_peak * SAFETY_MARGIN <= run.limit:
        hints.append(
            f"--lists-in-memory off (reads the records every epoch instead of holding "
            f"{format_gb(memory.resident)} of training lists)"
        )
    fit = (
        f"Make it fit with {', or '.join(hints)}"
        if hints
        else "No batch size makes it fit: the runtime and the input pipeline alone need "
        f"{format_gb(fixed + memory.resident)}"
    )
    limit = f"{format_gb(run.limit)} {'(--memory-limit)' if config.memory_limit else 'available'}"
    raise MemoryLimitError(
        f"this run needs {memory.describe()} (with a {SAFETY_MARGIN - 1:.0%} margin: "
        f"{format_gb(memory.peak * SAFETY_MARGIN)}), more than the {limit}: it would be killed "
        f"for lack of memory. {fit}; --memory-limit GB sets the limit to check against"
    )
