"""Ranking datasets read through tensorflow-datasets (``tfds:NAME``)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tfr_rankformer.core.elwc_schema import SPLITS
from tfrecords_tools.datasets import DATASETS, DatasetNotFoundError
from tfrecords_tools.letor.letor_parser import LetorFormatError
from tfrecords_tools.letor.letor_reader import QueryList

# Highest label of the TFDS ranking builders, by name prefix.
TFDS_MAX_RELEVANCE = {
    "mslr_web": DATASETS["MSLR-WEB30K"].max_relevance,
    "istella": DATASETS["Istella-S"].max_relevance,
    "yahoo_ltrc": DATASETS["Yahoo Set 1"].max_relevance,
}
_SPLIT_ALIASES = {"validation": "vali", "valid": "vali"}


class TfdsSource:
    """A TFDS ranking dataset, split by split."""

    def __init__(self, name: str, *, data_dir: str | None, download: bool):
        import tensorflow_datasets as tfds

        self.name = name
        try:
            self._builder = tfds.builder(name, data_dir=data_dir)
        except Exception as e:  # TFDS raises several types for unknown names
            raise DatasetNotFoundError(
                f"tfds:{name}: not a tensorflow-datasets dataset ({e})"
            ) from e
        features = self._builder.info.features
        missing = [k for k in ("float_features", "label") if k not in features]
        if missing:
            raise DatasetNotFoundError(
                f"tfds:{name} is not a learning-to-rank dataset: its examples lack "
                f"{' and '.join(missing)} (expected one example per query with "
                "float_features [items, d], label [items] and query_id, as mslr_web, istella "
                "and yahoo_ltrc have)"
            )
        self.num_features = int(features["float_features"].shape[-1])
        if download:
            self._builder.download_and_prepare()
        elif not self._builder.is_prepared():
            raise DatasetNotFoundError(
                f"tfds:{name} is not prepared under {self._builder.data_dir}. Pass "
                "--tfds-download to let tensorflow-datasets download and prepare it (datasets "
                "that need a manual download, such as yahoo_ltrc, explain where in the error "
                "that follows), or point --data-dir at a TFDS data directory that holds it."
            )
        prefix = name.split("/")[0]
        self.max_relevance = TFDS_MAX_RELEVANCE.get(prefix)
        available = list(self._builder.info.splits) or list(SPLITS)
        self.splits = {_SPLIT_ALIASES.get(s, s): s for s in available}

    def describe(self, split: str) -> dict:
        return {
            "tfds": self.name,
            "tfds_split": self.splits[split],
            "version": str(self._builder.info.version),
        }

    def lists(self, split: str) -> Iterator[QueryList]:
        """Yields the split's lists (non-numeric ``query_id``: ``-(list number)``)."""
        import tensorflow_datasets as tfds

        dataset = self._builder.as_dataset(split=self.splits[split], shuffle_files=False)
        where = f"tfds:{self.name}[{self.splits[split]}]"
        position, seen = 1, {}
        for ordinal, example in enumerate(tfds.as_numpy(dataset), start=1):
            labels = np.asarray(example["label"], dtype=np.float64)
            features = np.asarray(example["float_features"], dtype=np.float64)
            qid = _qid(example.get("query_id", b""), ordinal)
            context = f"(list {ordinal}, qid {qid})"
            bad = np.flatnonzero((labels < 0) | (labels != np.round(labels)))
            if bad.size:
                raise LetorFormatError(
                    where,
                    position + int(bad[0]),
                    f"labels must be non-negative integers {context}",
                    repr(labels[bad[0]]),
                )
            bad = np.flatnonzero(~np.isfinite(features).all(axis=1))
            if bad.size:
                raise LetorFormatError(
                    where, position + int(bad[0]), f"feature value is NaN or infinite {context}"
                )
            if qid in seen:
                raise LetorFormatError(
                    where,
                    position,
                    f"qid {qid} appears again {context}; it was list {seen[qid]}",
                    str(qid),
                )
            seen[qid] = ordinal
            positions = np.arange(position, position + len(labels), dtype=np.int64)
            position += len(labels)
            yield QueryList(qid, labels.astype(np.int64), features.astype(np.float32), positions)


def _qid(query_id, ordinal: int) -> int:
    text = query_id.decode("utf-8", "replace") if isinstance(query_id, bytes) else str(query_id)
    try:
        return int(text)
    except ValueError:
        return -ordinal
