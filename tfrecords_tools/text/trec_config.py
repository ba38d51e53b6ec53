"""The settings of a TREC-layout conversion, and the seeded hash split of queries."""

from __future__ import annotations

import dataclasses
import zlib

from tfr_rankformer.core.config_io import from_dict, require_positive_ints

# The ``TrecConfig`` fields that name input files: the query files first.
FILE_FIELDS = (
    "queries",
    "train_queries",
    "vali_queries",
    "test_queries",
    "train_qids",
    "vali_qids",
    "test_qids",
    "collection",
    "qrels",
    "run",
)


def _files(value) -> tuple:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


@dataclasses.dataclass(frozen=True)
class TrecConfig:
    """Settings of one TREC-layout conversion.

    Attributes:
      output: the output directory.
      queries: query files whose queries are split by a seeded hash of the qid
        (``split_fractions``); exclusive with the per-split files.
      train_queries: query files of the train split.
      vali_queries: query files of the vali split.
      test_queries: query files of the test split.
      train_qids: files listing the qids of the train split (the first column of
        each line), splitting ``queries`` instead of the hash; queries in no
        list are dropped (counted).
      vali_qids: files listing the qids of the vali split.
      test_qids: files listing the qids of the test split.
      collection: collection files.
      qrels: qrels files.
      run: run files (TREC or MS MARCO format).
      split_fractions: train, vali and test shares for ``queries``.
      max_list_size: each list keeps the run's first this many documents;
        ``None`` keeps all.
      min_list_size: shorter lists (after removing missing documents) are dropped.
      max_query_tokens: queries are cut to this many tokens; ``None``: no limit.
      max_document_tokens: documents are cut to this many tokens; ``None``: no limit.
      shards: TFRecord files per split.
      seed: seed of the hash split.
      overwrite: replace an existing output directory.
    """

    output: str
    queries: tuple = ()
    train_queries: tuple = ()
    vali_queries: tuple = ()
    test_queries: tuple = ()
    train_qids: tuple = ()
    vali_qids: tuple = ()
    test_qids: tuple = ()
    collection: tuple = ()
    qrels: tuple = ()
    run: tuple = ()
    split_fractions: tuple = (0.8, 0.1, 0.1)
    max_list_size: int | None = None
    min_list_size: int = 1
    max_query_tokens: int | None = None
    max_document_tokens: int | None = None
    shards: int = 1
    seed: int = 0
    overwrite: bool = False

    def __post_init__(self):
        for name in FILE_FIELDS:
            object.__setattr__(self, name, _files(getattr(self, name)))
        object.__setattr__(self, "split_fractions", tuple(self.split_fractions))
        if not self.output:
            raise ValueError("`output` must be a directory path")
        per_split = self.train_queries or self.vali_queries or self.test_queries
        if self.queries and per_split:
            raise ValueError(
                "give either `queries` (split by a hash of the qid) or per-split query files "
                "(`train_queries`, `vali_queries`, `test_queries`), not both"
            )
        if not (self.queries or per_split):
            raise ValueError("no query file given (`queries` or `train_queries`, ...)")
        if (self.train_qids or self.vali_qids or self.test_qids) and not self.queries:
            raise ValueError(
                "qid lists (`train_qids`, ...) split the queries of `queries`; per-split "
                "query files are split already"
            )
        for name in ("collection", "qrels", "run"):
            if not getattr(self, name):
                raise ValueError(f"no {name} file given (`{name}`)")
        fractions = self.split_fractions
        if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
            raise ValueError(
                f"`split_fractions` must be three non-negative shares (train, vali, test) "
                f"summing to 1, got {fractions}"
            )
        require_positive_ints(self, "shards", "min_list_size")
        require_positive_ints(
            self, "max_list_size", "max_query_tokens", "max_document_tokens", optional=True
        )

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in vars(self).items()}

    @classmethod
    def from_json(cls, values: dict) -> TrecConfig:
        return from_dict(cls, values, what="text conversion settings")


def hash_split(qid: str, *, seed: int, fractions: tuple) -> str:
    """The split of ``qid``: a seeded CRC32 of it, cut at the cumulative ``fractions``."""
    u = zlib.crc32(f"{seed}\t{qid}".encode()) / 2**32
    if u < fractions[0]:
        return "train"
    return "vali" if u < fractions[0] + fractions[1] else "test"
