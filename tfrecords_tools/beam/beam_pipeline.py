"""The Beam transforms of one split: lists grouped by qid and put in input order go through
``process_list``, so records match the local ones; shards hold lists sorted by qid."""

from __future__ import annotations

import dataclasses
import pickle

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms.stats import ApproximateQuantilesCombineFn

from tfrecords_tools.beam.beam_reading import ListPiece, read_letor_file
from tfrecords_tools.convert import ConvertConfig
from tfrecords_tools.elwc_writer import ElwcEncoder, frame_records, shard_names, shard_of
from tfrecords_tools.letor.letor_reader import QueryList
from tfrecords_tools.list_processing import ListPolicy, SplitStats, process_list


@dataclasses.dataclass(frozen=True)
class SplitJob:
    """One split of one fold (``None``: a single set) to convert."""

    fold: int | None
    split: str
    files: tuple[str, ...]
    out_dir: str
    num_features: int
    policy: ListPolicy
    quantile_epsilon: float
    convert: ConvertConfig

    @property
    def fit_seed(self) -> int | None:
        return self.convert.seed if self.split == "train" else None

    @property
    def key(self) -> str:
        return self.split if self.fold is None else f"Fold{self.fold}/{self.split}"


# Main outputs typed, since the tagged outputs would otherwise blur their inferred type.
@beam.typehints.with_output_types(tuple[int, ListPiece])
class _ReadFiles(beam.DoFn):
    """``(file index, path)`` -> ``(qid, ListPiece)``, with tagged side outputs."""

    def __init__(self, job: SplitJob):
        self._job = job

    def process(self, element):
        file_index, path = element
        job = self._job
        events = read_letor_file(
            path,
            file_index,
            num_features=job.num_features,
            max_relevance=job.policy.max_relevance,
            fit_seed=job.fit_seed,
            chunk_bytes=job.convert.chunk_bytes,
            opener=lambda p: FileSystems.open(p, compression_type=CompressionTypes.UNCOMPRESSED),
            duplicates=job.convert.duplicate_features,
        )
        for kind, value in events:
            if kind == "piece":
                yield value.query.qid, value
            elif kind == "columns":
                # [d, n] -> one batch of n values per feature, for its sketch.
                for j, column in enumerate(value):
                    yield beam.pvalue.TaggedOutput(kind, (j, column.tolist()))
            elif kind == "file":
                yield beam.pvalue.TaggedOutput(kind, (file_index, value))
            else:
                yield beam.pvalue.TaggedOutput(kind, value)


@beam.typehints.with_output_types(tuple[int, tuple[int, list[bytes]]])
class _ProcessList(beam.DoFn):
    """``(qid, pieces)`` -> ``(shard, (qid, records))``, and the list's counts as ``stats``."""

    def __init__(self, job: SplitJob):
        self._job = job
        self._encoder = None

    def setup(self):
        self._encoder = ElwcEncoder(self._job.num_features)

    def process(self, element):
        qid, pieces = element
        pieces = sorted(pieces, key=lambda piece: piece.order)
        query = QueryList.join([piece.query for piece in pieces])
        stats = SplitStats()
        where = self._job.files[pieces[0].file_index]
        records = process_list(
            query, self._job.split, where, self._encoder, self._job.policy, stats
        )
        if records:
            yield shard_of(qid, self._job.convert.shards), (qid, records)
        yield beam.pvalue.TaggedOutput("stats", stats)


def _merge_stats(parts) -> SplitStats:
    """Adds up the counts of lists (sums, so order does not matter)."""
    total = SplitStats()
    for stats in parts:
        total.merge(stats)
    return total


class _WriteShard(beam.DoFn):
    """``(shard, lists)`` -> the shard file, lists sorted by qid; yields ``(name, records)``."""

    def __init__(self, job: SplitJob):
        self._job = job

    def process(self, element):
        shard, lists = element
        name = shard_names(self._job.split, self._job.convert.shards)[shard]
        count = 0
        stream = FileSystems.create(
            FileSystems.join(self._job.out_dir, name),
            compression_type=CompressionTypes.UNCOMPRESSED,
        )
        try:
            for _, records in sorted(item for item in lists if item is not None):
                stream.write(frame_records(records))
                count += len(records)
        finally:
            stream.close()
        yield name, count


def convert_split(pipeline, job: SplitJob) -> tuple[list, object]:
    """Adds one split's conversion to ``pipeline``; returns its results as PCollections of
    ``((fold, split, kind), value)`` pairs, and its bad lines."""
    label = job.key
    files = pipeline | f"{label}/Files" >> beam.Create(list(enumerate(job.files)))
    read = (
        files
        # Spreads the files over workers instead of fusing them with Create.
        | f"{label}/Spread" >> beam.Reshuffle()
        | f"{label}/Read"
        >> beam.ParDo(_ReadFiles(job)).with_outputs("bad", "fit", "columns", "file", main="pieces")
    )
    processed = (
        read.pieces
        | f"{label}/GroupByQid" >> beam.GroupByKey()
        | f"{label}/Process" >> beam.ParDo(_ProcessList(job)).with_outputs("stats", main="lists")
    )
    # Every shard is written, even one that receives no list.
    empty = pipeline | f"{label}/Shards" >> beam.Create(
        [(s, None) for s in range(job.convert.shards)]
    )
    written = (
        (processed.lists, empty)
        | f"{label}/AllShards" >> beam.Flatten()
        | f"{label}/GroupByShard" >> beam.GroupByKey()
        | f"{label}/Write" >> beam.ParDo(_WriteShard(job))
    )
    results = {
        "stats": processed.stats | f"{label}/Stats" >> beam.CombineGlobally(_merge_stats),
        "shards": written | f"{label}/ShardList" >> beam.combiners.ToList(),
        "files": read.file | f"{label}/FileList" >> beam.combiners.ToList(),
        "bad_lines": read.bad | f"{label}/BadCount" >> beam.combiners.Count.Globally(),
    }
    if job.fit_seed is not None:
        sketch = ApproximateQuantilesCombineFn.create(
            job.convert.num_quantiles, epsilon=job.quantile_epsilon, input_batched=True
        )
        results["fits"] = read.fit | f"{label}/FitList" >> beam.combiners.ToList()
        results["quantiles"] = (
            read.columns
            | f"{label}/Quantiles" >> beam.CombinePerKey(sketch)
            | f"{label}/QuantileList" >> beam.combiners.ToList()
        )
    keyed = [
        pcoll
        | f"{label}/Key{kind}" >> beam.Map(lambda value, k=(job.fold, job.split, kind): (k, value))
        for kind, pcoll in results.items()
    ]
    return keyed, read.bad


class WriteResults(beam.DoFn):
    """Writes every ``(key, value)`` result, gathered in one list, as one pickle file."""

    def __init__(self, path: str):
        self._path = path

    def process(self, results):
        stream = FileSystems.create(self._path, compression_type=CompressionTypes.UNCOMPRESSED)
        try:
            stream.write(pickle.dumps(dict(results), protocol=pickle.HIGHEST_PROTOCOL))
        finally:
            stream.close()


def read_results(path: str) -> dict:
    """The results :class:`WriteResults` wrote; the file is removed."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        results = pickle.loads(stream.read())
    FileSystems.delete([path])
    return results
