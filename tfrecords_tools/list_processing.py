"""What happens to one query list on its way to the shards, and the counts kept."""

from __future__ import annotations

import dataclasses

import numpy as np

from tfrecords_tools.click_simulation import ClickConfig, list_rng, simulate_clicks
from tfrecords_tools.elwc_writer import ElwcEncoder
from tfrecords_tools.letor.letor_parser import LetorFormatError
from tfrecords_tools.letor.letor_reader import QueryList


@dataclasses.dataclass(frozen=True)
class ListPolicy:
    """Subsampling, filtering and click simulation (``clicks``) applied to each list."""

    max_list_size: int | None
    min_list_size: int
    clicks: ClickConfig | None
    max_relevance: int
    seed: int


class Histogram:
    """Counts of small non-negative integers."""

    def __init__(self):
        self.counts = np.zeros(0, dtype=np.int64)

    def add(self, values) -> None:
        self._add_counts(np.bincount(np.asarray(values, dtype=np.int64).ravel()))

    def merge(self, other: Histogram) -> None:
        self._add_counts(other.counts)

    def _add_counts(self, counts: np.ndarray) -> None:
        if counts.size > self.counts.size:
            self.counts = np.pad(self.counts, (0, counts.size - self.counts.size))
        self.counts[: counts.size] += counts

    def as_dict(self) -> dict[str, int]:
        return {str(k): int(c) for k, c in enumerate(self.counts) if c}


@dataclasses.dataclass
class SplitStats:
    """Counts gathered while a split is written (see the README's manifest section)."""

    input_lists: int = 0
    input_items: int = 0
    num_lists: int = 0
    num_items: int = 0
    labels: Histogram = dataclasses.field(default_factory=Histogram)
    relevance: Histogram = dataclasses.field(default_factory=Histogram)
    list_labels: Histogram = dataclasses.field(default_factory=Histogram)
    intents: Histogram = dataclasses.field(default_factory=Histogram)
    # Items per written list: of every list, and of the lists whose list label is 0.
    list_lengths: Histogram = dataclasses.field(default_factory=Histogram)
    empty_list_lengths: Histogram = dataclasses.field(default_factory=Histogram)
    items_dropped: dict = dataclasses.field(default_factory=dict)
    lists_dropped: dict = dataclasses.field(default_factory=dict)
    longest_list: int = 0

    def drop(self, reason: str, *, items: int, lists: int = 0) -> None:
        if items:
            self.items_dropped[reason] = self.items_dropped.get(reason, 0) + items
        if lists:
            self.lists_dropped[reason] = self.lists_dropped.get(reason, 0) + lists

    def record(self, labels: np.ndarray, relevance: np.ndarray) -> None:
        """Counts written lists: ``[m, k]`` labels and relevance of ``m`` lists."""
        self.num_lists += labels.shape[0]
        self.num_items += int(labels.size)
        self.longest_list = max(self.longest_list, int(labels.shape[1]))
        self.labels.add(labels)
        self.relevance.add(relevance)
        list_labels = labels.max(axis=1)
        self.list_labels.add(list_labels)
        lengths = np.full(labels.shape[0], labels.shape[1])
        self.list_lengths.add(lengths)
        self.empty_list_lengths.add(lengths[list_labels == 0])

    def merge(self, other: SplitStats) -> None:
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, Histogram):
                mine.merge(theirs)
            elif isinstance(mine, dict):
                for reason, count in theirs.items():
                    mine[reason] = mine.get(reason, 0) + count
            elif field.name == "longest_list":
                self.longest_list = max(mine, theirs)
            else:
                setattr(self, field.name, mine + theirs)

    def as_dict(self, simulated: bool) -> dict:
        out = {
            "num_lists": self.num_lists,
            "num_items": self.num_items,
            "longest_list": self.longest_list,
            "input_lists": self.input_lists,
            "input_items": self.input_items,
            "label_histogram": self.labels.as_dict(),
            "relevance_histogram": self.relevance.as_dict(),
            "list_label_histogram": self.list_labels.as_dict(),
            "list_length_histogram": self.list_lengths.as_dict(),
            "empty_list_length_histogram": self.empty_list_lengths.as_dict(),
            "items_dropped": dict(sorted(self.items_dropped.items())),
            "lists_dropped": dict(sorted(self.lists_dropped.items())),
        }
        if simulated:
            out["intent_histogram"] = self.intents.as_dict()
        return out


def reappearing_qid_error(path: str, qid: int, line: int, first_line: int) -> LetorFormatError:
    """The error for a qid whose items are not contiguous."""
    return LetorFormatError(
        path,
        line,
        f"qid {qid} reappears after other qids (its list began at line {first_line}); "
        "the items of a list must be contiguous",
        f"qid:{qid}",
    )


def label_error(where: str, line: int, label: int, max_relevance: int) -> LetorFormatError:
    return LetorFormatError(
        where,
        line,
        f"label {label} is above the dataset's maximum relevance {max_relevance} "
        "(pass --max-relevance to change it)",
        str(label),
    )


def check_labels(query: QueryList, max_relevance: int, where: str) -> None:
    """Raises ``LetorFormatError`` at the first label above ``max_relevance``."""
    if query.labels.max() > max_relevance:
        i = int(np.argmax(query.labels > max_relevance))
        raise label_error(where, int(query.line_numbers[i]), int(query.labels[i]), max_relevance)


def process_list(
    query: QueryList, split: str, where: str, encoder: ElwcEncoder, policy: ListPolicy, stats
) -> list[bytes]:
    """One list subsampled, filtered and maybe simulated, as ELWC records; its generator
    depends only on the seed, split and qid."""
    n = len(query)
    stats.input_lists += 1
    stats.input_items += n
    check_labels(query, policy.max_relevance, where)
    rng = list_rng(policy.seed, split, query.qid)
    labels, features = query.labels, query.features
    if policy.max_list_size is not None and n > policy.max_list_size:
        keep = np.sort(rng.choice(n, size=policy.max_list_size, replace=False))
        labels, features = labels[keep], features[keep]
        stats.drop("max_list_size", items=n - policy.max_list_size)
    if len(labels) < policy.min_list_size:
        stats.drop("min_list_size", items=len(labels), lists=1)
        return []
    if policy.clicks is None:
        stats.record(labels[None], labels[None])
        return [encoder.encode(query.qid, features, labels, labels, context=query.context)]
    simulated = simulate_clicks(
        labels, rng=rng, config=policy.clicks, max_relevance=policy.max_relevance
    )
    stats.intents.add(simulated.intents)
    relevance = labels[simulated.indices]  # [N_b, k]
    stats.record(simulated.labels, relevance)
    return encoder.encode_lists(
        query.qid,
        features[simulated.indices],
        simulated.labels,
        relevance,
        context=query.context,
    )
