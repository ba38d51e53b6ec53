"""Length buckets (edges growing by about sqrt(2)) and the lists per batch: fixed
(``--batch-size``) or filling a budget of padded items and attention entries.

>>> bucket_edges(100)
(16, 24, 32, 48, 64, 96, 100)
>>> plan = plan_batches({"10": 3000, "100": 500}, edges=bucket_edges(100),
...                     batch_items=32768, max_lists=2048)
>>> plan.lists_per_batch[::6], plan.counts[::6], plan.steps
((2048, 327), (3000, 500), 4)
"""

from __future__ import annotations

import bisect
import dataclasses
import math

# Powers of two and the midpoints between them (x1.5), from 16 up to 2^20.
BASE_EDGES = tuple(sorted({16 << k for k in range(17)} | {24 << k for k in range(17)}))
# A batch's attention entries stay within `batch_items` times this length.
ATTENTION_REFERENCE_LENGTH = 256


def bucket_edges(longest: int, *, cap: int | None = None, smallest: int = 16) -> tuple[int, ...]:
    """The buckets' padded lengths for lists up to ``longest`` (or ``cap``) items; none below
    ``smallest``, so the click protocol's lists share one, as in the released code."""
    if longest < 1:
        raise ValueError(f"`longest` must be >= 1, got {longest}")
    top = min(longest, cap) if cap else longest
    if top <= smallest:
        return (top,)
    inner = tuple(e for e in BASE_EDGES if smallest <= e < top)
    return (*inner, top)


def clipped_lengths(histogram: dict, cap: int | None) -> dict[int, int]:
    """``{length: lists}`` after lists longer than ``cap`` are sampled down to it."""
    out: dict[int, int] = {}
    for length, count in histogram.items():
        n = int(length)
        n = min(n, cap) if cap else n
        out[n] = out.get(n, 0) + int(count)
    return out


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """One epoch's batches: per bucket, its padded length, lists per batch and lists."""

    edges: tuple[int, ...]
    lists_per_batch: tuple[int, ...]
    counts: tuple[int, ...]

    def __post_init__(self):
        if not (len(self.edges) == len(self.lists_per_batch) == len(self.counts)):
            raise ValueError("`edges`, `lists_per_batch` and `counts` must have equal lengths")
        if any(b < 1 for b in self.lists_per_batch):
            raise ValueError(f"every bucket needs >= 1 list per batch, got {self.lists_per_batch}")

    @property
    def steps(self) -> int:
        """Batches (optimizer steps) in one epoch."""
        return sum(math.ceil(c / b) for c, b in zip(self.counts, self.lists_per_batch))

    @property
    def lists(self) -> int:
        return sum(self.counts)

    def padded_items(self) -> int:
        """Items in an epoch's batches, padding included."""
        return sum(c * e for c, e in zip(self.counts, self.edges))

    def largest_batch(self) -> tuple[int, int]:
        """``(lists, length)`` of the batch with the most padded items."""
        used = [
            (b * e, b, e) for b, e, c in zip(self.lists_per_batch, self.edges, self.counts) if c
        ]
        _, lists, length = max(used, default=(0, self.lists_per_batch[0], self.edges[0]))
        return lists, length

    def describe(self, unit: str = "items") -> str:
        """One entry per used bucket: ``<= 128 items: 2,031 lists x 256``."""
        return "; ".join(
            f"<= {e} {unit}: {c:,} lists x {b}"
            for e, b, c in zip(self.edges, self.lists_per_batch, self.counts)
            if c
        )


def plan_batches(
    lengths: dict,
    *,
    edges: tuple[int, ...],
    batch_items: int | None = None,
    max_lists: int | None = None,
    lists_per_batch: int | None = None,
) -> BatchPlan:
    """The plan for ``{length: lists}``: ``lists_per_batch`` in every bucket, else a budget
    of ``batch_items`` padded items and at most ``max_lists`` lists per batch."""
    counts = [0] * len(edges)
    for length, count in lengths.items():
        n = int(length)
        if n > edges[-1]:
            raise ValueError(f"a list of {n} items is longer than the last bucket ({edges[-1]})")
        counts[min(bisect.bisect_left(edges, n), len(edges) - 1)] += int(count)
    if lists_per_batch is not None:
        sizes = [lists_per_batch] * len(edges)
    else:
        if batch_items is None or max_lists is None:
            raise ValueError("give `lists_per_batch`, or `batch_items` and `max_lists`")
        attention = batch_items * ATTENTION_REFERENCE_LENGTH
        sizes = [max(1, min(max_lists, batch_items // e, attention // (e * e))) for e in edges]
    return BatchPlan(tuple(edges), tuple(sizes), tuple(counts))
