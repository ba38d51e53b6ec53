"""The settings of a TREC-layout conversion, and the seeded hash split of queries."""

from __future__ import annotations

import dataclasses
import zlib

from tfr_rankformer.core.config_io import from_dict, require_positive_ints, setting

_FILE = {"action": "append", "metavar": "FILE"}


def _files(value) -> tuple:
    return (value,) if isinstance(value, str) else tuple(value or ())


@dataclasses.dataclass(frozen=True)
class TrecConfig:
    """Settings of one TREC-layout conversion (text lists to the text ELWC). Every file
    option is repeatable and reads .gz too."""

    output: str
    queries: tuple = setting(
        (),
        "queries 'qid<TAB>text', split into train/vali/test by a seeded hash of the qid "
        "(--split-fractions)",
        **_FILE,
    )
    train_queries: tuple = setting((), "queries of the train split (instead of --queries)", **_FILE)
    vali_queries: tuple = setting((), "queries of the vali split", **_FILE)
    test_queries: tuple = setting((), "queries of the test split", **_FILE)
    train_qids: tuple = setting(
        (),
        "qids of the train split, one a line (the first column; a queries TSV serves "
        "too), splitting --queries instead of the hash; queries in no list are dropped "
        "and counted",
        **_FILE,
    )
    vali_qids: tuple = setting((), "qids of the vali split, likewise", **_FILE)
    test_qids: tuple = setting((), "qids of the test split, likewise", **_FILE)
    collection: tuple = setting(
        (),
        "documents 'docid<TAB>text' (further tab-separated columns, e.g. a title, are "
        "joined to the text); streamed, only the run's documents are kept",
        **_FILE,
    )
    qrels: tuple = setting(
        (),
        "judgements 'qid iteration docid relevance' (TREC qrels); unjudged run documents "
        "get label 0",
        **_FILE,
    )
    run: tuple = setting(
        (),
        "the first-stage ranking to re-rank: TREC run 'qid Q0 docid rank score tag' or MS "
        "MARCO 'qid<TAB>docid<TAB>rank' (tfr-bm25 run writes one)",
        **_FILE,
    )
    split_fractions: tuple = setting(
        (0.8, 0.1, 0.1),
        "shares of the hash split of --queries. Default: 0.8,0.1,0.1",
        metavar="TRAIN,VALI,TEST",
    )
    max_list_size: int | None = None
    min_list_size: int = 1
    max_query_tokens: int | None = setting(None, "cut longer queries (counted). Default: no limit")
    max_document_tokens: int | None = setting(
        None, "cut longer documents (counted). Default: no limit"
    )
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


# The fields that name input files, the query files first.
FILE_FIELDS = tuple(
    f.name for f in dataclasses.fields(TrecConfig) if f.metadata.get("metavar") == "FILE"
)


def hash_split(qid: str, *, seed: int, fractions: tuple) -> str:
    """The split of ``qid``: a seeded CRC32 of it, cut at the cumulative ``fractions``."""
    u = zlib.crc32(f"{seed}\t{qid}".encode()) / 2**32
    if u < fractions[0]:
        return "train"
    return "vali" if u < fractions[0] + fractions[1] else "test"
