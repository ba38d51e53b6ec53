"""Writing one split: workers write the lists inside their blocks to part files, this
process joins those that straddle blocks, and parts go to the shards in input order."""

from __future__ import annotations

import collections
import os
import shutil
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from tfr_rankformer.core import fault_points
from tfrecords_tools.block_processing import BlockResult, BlockTask, process_block
from tfrecords_tools.elwc_writer import ElwcEncoder, PartWriter, shard_names
from tfrecords_tools.letor.letor_parser import LetorFormatError
from tfrecords_tools.letor.letor_reader import LetorFile, ParseCounts, QueryList
from tfrecords_tools.list_processing import (
    ListPolicy,
    SplitStats,
    process_list,
    reappearing_qid_error,
)
from tfrecords_tools.normalization import NormalizationFitter

_FIT_BATCH = 65_536


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


class _BlockMerger:
    """Takes the blocks' results in input order, joining the lists split across blocks and
    checking that no qid comes back: the lists it closes while block ``i`` is handled go to
    part ``i.0``, before the block's own part ``i.1``."""

    def __init__(self, where: str, *, target: SplitTarget, policy, fitter, num_features: int):
        self.stats, self.parsing = SplitStats(), ParseCounts()
        self._where, self._target, self._policy, self._fitter = where, target, policy, fitter
        self._encoder = ElwcEncoder(num_features)
        self._first_seen: dict[int, int] = {}
        self._open: list[QueryList] = []  # pieces of the open list, joined when it closes
        self._open_part(0)

    def _open_part(self, index: int) -> None:
        self._part_name = f"{index:06d}.0"
        self._part = self._target.part(self._part_name)

    def _check_new(self, qid: int, line: int) -> None:
        if qid in self._first_seen:
            raise reappearing_qid_error(self._where, qid, line, self._first_seen[qid])
        self._first_seen[qid] = line

    def _add(self, piece: QueryList) -> None:
        """Continues the open list with ``piece`` or closes it and opens ``piece``."""
        if self._open and self._open[0].qid == piece.qid:
            self._open.append(piece)
            return
        self._close()
        self._check_new(piece.qid, int(piece.line_numbers[0]))
        self._open = [piece]

    def _close(self) -> None:
        if self._open:
            query = QueryList.join(self._open)
            records = process_list(
                query, self._target.split, self._where, self._encoder, self._policy, self.stats
            )
            self._part.write_list(query.qid, records)
            self._open = []

    def merge(self, index: int, result: BlockResult) -> None:
        """Handles block ``index``'s result (raising its error once the lists before it
        are checked); its parts then move to the shards."""
        if result.error is not None:
            for position, (qid, line) in enumerate(zip(result.group_qids, result.group_lines)):
                if not (position == 0 and self._open and self._open[0].qid == qid):
                    self._check_new(qid, line)
            raise result.error
        self.parsing.add(result.parsing)
        if result.fit is not None:
            self._fitter.merge(result.fit)
        if result.first is not None:
            self._add(result.first)
        if result.last is not None:
            # The block holds more than one list: its first list is complete.
            self._close()
            for qid, line in zip(result.group_qids[1:-1], result.group_lines[1:-1]):
                self._check_new(qid, line)
            self._target.add_counts(result.records_per_shard)
            self.stats.merge(result.stats)
            self._add(result.last)
        self._target.add_counts(self._part.close())
        self._target.append(self._part_name, f"{index:06d}.1")
        self._open_part(index + 1)

    def finish(self) -> None:
        self._close()
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
                on_progress(letor.bytes_read, merger.parsing.items)
        merger.finish()
    except BaseException:
        merger.abandon()
        raise
    if merger.parsing.items == 0:
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
