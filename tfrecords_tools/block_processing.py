"""One block of a LETOR file, in a worker or in-process: parsed, fitted (train) and its inner
lists encoded to part files; its first and last lists go back to be joined. Blocks are
parsed in processes: parsing holds the GIL, so threads would not help."""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading

from tfrecords_tools.elwc_writer import ElwcEncoder, PartWriter
from tfrecords_tools.letor.letor_fast_path import warm_up_fast_path
from tfrecords_tools.letor.letor_parser import LetorFormatError
from tfrecords_tools.letor.letor_reader import (
    Block,
    ParseCounts,
    QueryList,
    parse_block,
    query_lists,
)
from tfrecords_tools.list_processing import (
    ListPolicy,
    SplitStats,
    check_labels,
    process_list,
    reappearing_qid_error,
)
from tfrecords_tools.normalization import FitPartial


@dataclasses.dataclass(frozen=True)
class BlockTask:
    """One block and where its lists go; ``fit_seed`` ``None`` skips the statistics."""

    block: Block
    num_features: int
    split: str
    policy: ListPolicy
    parts_dir: str
    part: str
    num_shards: int
    fit_seed: int | None = None
    fit_threshold: float = 1.0
    in_worker: bool = False
    duplicates: str = "error"


@dataclasses.dataclass
class BlockResult:
    """A block's first and last lists, counts, qids and statistics; ``error`` is returned so
    the main process can first report a qid reappearing from an earlier block."""

    first: QueryList | None = None
    last: QueryList | None = None
    records_per_shard: list[int] = dataclasses.field(default_factory=list)
    group_qids: list[int] = dataclasses.field(default_factory=list)
    group_lines: list[int] = dataclasses.field(default_factory=list)
    stats: SplitStats = dataclasses.field(default_factory=SplitStats)
    fit: FitPartial | None = None
    parsing: ParseCounts = dataclasses.field(default_factory=ParseCounts)
    error: LetorFormatError | None = None


def _first_error(groups: list[QueryList], task: BlockTask) -> LetorFormatError | None:
    """The earliest repeated qid or out-of-range label among the block's lists."""
    first_line: dict[int, int] = {}
    for query in groups:
        line = int(query.line_numbers[0])
        if query.qid in first_line:
            return reappearing_qid_error(task.block.path, query.qid, line, first_line[query.qid])
        first_line[query.qid] = line
        try:
            check_labels(query, task.policy.max_relevance, task.block.path)
        except LetorFormatError as error:
            return error
    return None


def process_block(task: BlockTask) -> BlockResult:
    try:
        parsed, parsing = parse_block(
            task.block,
            task.num_features,
            use_threads=not task.in_worker,
            duplicates=task.duplicates,
        )
    except LetorFormatError as error:
        return BlockResult(error=error)
    groups = query_lists(parsed) if len(parsed) else []
    error = _first_error(groups, task)
    if error is not None:
        before = [q for q in groups if q.line_numbers[0] < error.line]
        return BlockResult(
            group_qids=[q.qid for q in before],
            group_lines=[int(q.line_numbers[0]) for q in before],
            error=error,
        )
    fit = None
    if task.fit_seed is not None and len(parsed):
        fit = FitPartial.of(
            parsed.features, parsed.line_numbers, seed=task.fit_seed, threshold=task.fit_threshold
        )
    stats = SplitStats()
    encoder = ElwcEncoder(task.num_features)
    part = PartWriter(task.parts_dir, task.split, task.part, task.num_shards)
    try:
        for query in groups[1:-1]:
            records = process_list(query, task.split, task.block.path, encoder, task.policy, stats)
            part.write_list(query.qid, records)
    finally:
        records_per_shard = part.close()
    return BlockResult(
        first=groups[0] if groups else None,
        last=groups[-1] if len(groups) > 1 else None,
        records_per_shard=records_per_shard,
        group_qids=[q.qid for q in groups],
        group_lines=[int(q.line_numbers[0]) for q in groups],
        stats=stats,
        fit=fit,
        parsing=parsing,
    )


# === Worker processes ===


def default_workers() -> int:
    """One parsing process per core, at most 4 (memory grows with each)."""
    return max(1, min(4, os.cpu_count() or 1))


def _start_method() -> str:
    # fork keeps the warm-up, but a worker forked while another thread holds a lock
    # can crash, and the pool then waits forever: a process running Python threads or
    # TensorFlow (whose native threads Python does not count) uses forkserver.
    if not sys.platform.startswith("linux"):
        return "spawn"
    if threading.active_count() > 1 or "tensorflow" in sys.modules:
        return "forkserver"
    return "fork"


@contextlib.contextmanager
def parse_workers(count: int):
    """Yields ``(pool, count)`` of ``count`` parsing processes; ``(None, 1)`` if ``count <= 1``."""
    if count <= 1:
        yield None, 1
        return
    method = _start_method()
    if method == "fork":
        warm_up_fast_path()
    context = multiprocessing.get_context(method)
    # Workers ignore Ctrl-C: it reaches the main process, which tears the pool down.
    pool = context.Pool(count, initializer=signal.signal, initargs=(signal.SIGINT, signal.SIG_IGN))
    try:
        yield pool, count
    finally:
        pool.terminate()
        pool.join()
