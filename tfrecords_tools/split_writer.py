"""Writing one split: workers write the lists inside their blocks to part files, this
process joins those that straddle blocks, and parts go to the shards in input order."""

from __future__ import annotations

import collections
import dataclasses
import os
import shutil
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from tfr_rankformer.core import fault_points
from tfrecords_tools.block_processing import BlockResult, BlockTask, process_block
from tfrecords_tools.elwc_writer import ElwcEncoder, PartWriter, shard_names
from tfrecords_tools.letor.letor_parser import LetorFormatError
from tfrecords_tools.letor.letor_reader import LetorFile, QueryList
from tfrecords_tools.list_processing import (
    ListPolicy,
    SplitStats,
    process_list,
    reappearing_qid_error,
)
from tfrecords_tools.normalization import NormalizationFitter

_FIT_BATCH = 65_536


@dataclasses.dataclass
class ParseCounts:
    """How a LETOR file's lines were parsed: items of the dense fast path, and lines
    sorted, resolving a repeated index, or omitting some index."""

    fast_items: int = 0
    unsorted_lines: int = 0
    duplicate_lines: int = 0
    sparse_lines: int = 0

    def add(self, result: BlockResult) -> None:
        self.fast_items += result.num_items if result.fast else 0
        self.unsorted_lines += result.unsorted_lines
        self.duplicate_lines += result.duplicate_lines
        self.sparse_lines += result.sparse_lines


class SplitTarget:
    """A split's shard files (all written, possibly empty), to which finished parts are
    appended in the order given, and its record counts per shard."""

    def __init__(self, parts_dir: str, out_dir: str, split: str, num_shards: int):
        self.parts_dir, self.split, self.num_shards = parts_dir, split, num_shards
        self.counts = [0] * num_shards
        self.names = shard_names(split, num_shards)
        self._files = [open(os.path.join(out_dir, name), "wb") for name in self.names]

    def part(self, name: str) -> PartWriter:
        return PartWriter(self.parts_dir, self.split, name, self.num_shards)

    def add_counts(self, counts: list[int]) -> None:
        self.counts = [a + b for a, b in zip(self.counts, counts)]

    def append(self, *names: str) -> None:
        """Moves the parts' records to the end of the shards and removes the parts."""
        for name in names:
            for shard, destination in enumerate(self._files):
                path = os.path.join(self.parts_dir, f"{self.split}.{name}.{shard:05d}.part")
                if os.path.exists(path):
                    with open(path, "rb") as source:
                        shutil.copyfileobj(source, destination, 1 << 22)
                    os.remove(path)
            fault_points.reached("convert.shard")

    def close(self) -> list[str]:
        for destination in self._files:
            destination.close()
        return self.names


def _in_order(pool, tasks: Iterator[BlockTask], window: int) -> Iterator[BlockResult]:
    """Results of ``tasks`` in order, at most ``window`` in flight in ``pool``."""
    if pool is None:
        yield from map(process_block, tasks)
        return
    in_flight: collections.deque = collections.deque()
    for task in tasks:
        in_flight.append(pool.apply_async(process_block, (task,)))
        if len(in_flight) >= window:
            yield in_flight.popleft().get()
    while in_flight:
        yield in_flight.popleft().get()


class _ListJoiner:
    """Closes lists in input order, checking that no qid comes back."""

    def __init__(self, path: str, emit: Callable[[QueryList], None]):
        self._path = path
        self._emit = emit
        self._first_seen: dict[int, int] = {}
        # Pieces of the open list, joined once when it closes.
        self._open: list[QueryList] = []

    def check_new(self, qid: int, line: int) -> None:
        if qid in self._first_seen:
            raise reappearing_qid_error(self._path, qid, line, self._first_seen[qid])
        self._first_seen[qid] = line

    def check_before_error(self, qids: list[int], lines: list[int]) -> None:
        """Checks the lists a failed block began before its error, in order."""
        for position, (qid, line) in enumerate(zip(qids, lines)):
            continues = position == 0 and bool(self._open) and self._open[0].qid == qid
            if not continues:
                self.check_new(qid, line)

    def add(self, piece: QueryList) -> None:
        """Continues the open list with ``piece`` or closes it and opens ``piece``."""
        if self._open and self._open[0].qid == piece.qid:
            self._open.append(piece)
            return
        self.close()
        self.check_new(piece.qid, int(piece.line_numbers[0]))
        self._open = [piece]

    def close(self) -> None:
        if self._open:
            self._emit(QueryList.join(self._open))
            self._open = []


class _BlockMerger:
    """Takes the blocks' results in input order: the lists it closes while block ``i`` is
    handled go to part ``i.0``, before the block's own part ``i.1``."""

    def __init__(self, where: str, *, target: SplitTarget, policy, fitter, num_features: int):
        self.stats, self.parsing, self.items = SplitStats(), ParseCounts(), 0
        self._where, self._target, self._policy, self._fitter = where, target, policy, fitter
        self._encoder = ElwcEncoder(num_features)
        self._joiner = _ListJoiner(where, self._write_joined)
        self._open_part(0)

    def _open_part(self, index: int) -> None:
        self._part_name = f"{index:06d}.0"
        self._part = self._target.part(self._part_name)

    def _write_joined(self, query: QueryList) -> None:
        records = process_list(
            query, self._target.split, self._where, self._encoder, self._policy, self.stats
        )
        self._part.write_list(query.qid, records)

    def merge(self, index: int, result: BlockResult) -> None:
        """Handles block ``index``'s result (raising its error once the lists before it
        are checked); its parts then move to the shards."""
        joiner = self._joiner
        if result.error is not None:
            joiner.check_before_error(result.group_qids, result.group_lines)
            raise result.error
        self.items += result.num_items
        self.parsing.add(result)
        if result.fit is not None:
            self._fitter.merge(result.fit)
        if result.first is not None:
            joiner.add(result.first)
        if result.last is not None:
            # The block holds more than one list: its first list is complete.
            joiner.close()
            for qid, line in zip(result.group_qids[1:-1], result.group_lines[1:-1]):
                joiner.check_new(qid, line)
            self._target.add_counts(result.records_per_shard)
            self.stats.merge(result.stats)
            joiner.add(result.last)
        self._target.add_counts(self._part.close())
        self._target.append(self._part_name, f"{index:06d}.1")
        self._open_part(index + 1)

    def finish(self) -> None:
        self._joiner.close()
        self._target.add_counts(self._part.close())
        self._target.append(self._part_name)

    def abandon(self) -> None:
        self._part.close()


def write_letor_split(
    letor: LetorFile,
    *,
    num_features: int,
    target: SplitTarget,
    policy: ListPolicy,
    fitter: NormalizationFitter | None,
    pool=None,
    window: int = 4,
    on_progress: Callable[[int, int], None] | None = None,
    duplicates: str = "error",
) -> tuple[SplitStats, ParseCounts]:
    """Writes a LETOR file's lists to the split's shards, ``window`` blocks in flight in
    ``pool``; raises :class:`LetorFormatError` on bad lines, labels or reappearing qids."""
    merger = _BlockMerger(
        letor.path, target=target, policy=policy, fitter=fitter, num_features=num_features
    )
    # Workers re-read plain files by offset rather than receive each block.
    tasks = (
        BlockTask(
            block=block,
            num_features=num_features,
            split=target.split,
            policy=policy,
            parts_dir=target.parts_dir,
            part=f"{index:06d}.1",
            num_shards=target.num_shards,
            fit_seed=fitter.seed if fitter is not None else None,
            fit_threshold=fitter.threshold if fitter is not None else 1.0,
            in_worker=pool is not None,
            duplicates=duplicates,
        )
        for index, block in enumerate(letor.blocks(keep_data=pool is None))
    )
    try:
        for index, result in enumerate(_in_order(pool, tasks, window)):
            merger.merge(index, result)
            fault_points.reached("convert.block")
            if on_progress is not None:
                on_progress(letor.bytes_read, merger.items)
        merger.finish()
    except BaseException:
        merger.abandon()
        raise
    if merger.items == 0:
        raise LetorFormatError(letor.path, None, "file is empty: it holds no LETOR lines")
    return merger.stats, merger.parsing


def write_query_lists(
    lists: Iterable[QueryList],
    *,
    num_features: int,
    where: str,
    target: SplitTarget,
    policy: ListPolicy,
    fitter: NormalizationFitter | None,
) -> SplitStats:
    """Writes lists that arrive already grouped (TFDS and ELWC input) in this process."""
    stats, encoder = SplitStats(), ElwcEncoder(num_features)
    part = target.part("000000.0")
    pending: list[QueryList] = []
    pending_items = 0

    def fit_pending() -> None:
        nonlocal pending_items
        if fitter is not None and pending:
            features = np.concatenate([q.features for q in pending])
            positions = np.concatenate([q.line_numbers for q in pending])
            fitter.merge(fitter.partial(features, positions))
        pending.clear()
        pending_items = 0

    try:
        for query in lists:
            pending.append(query)
            pending_items += len(query)
            if pending_items >= _FIT_BATCH:
                fit_pending()
            records = process_list(query, target.split, where, encoder, policy, stats)
            part.write_list(query.qid, records)
        fit_pending()
    finally:
        target.add_counts(part.close())
    target.append("000000.0")
    return stats
