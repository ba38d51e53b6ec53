"""A converted split as flat numpy arrays, one row per item and lists as offsets, as
LightGBM takes them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tfr_rankformer.core.elwc_schema import FEATURES, LABEL, MASK, QID, RELEVANCE
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.manifest import Manifest


@dataclasses.dataclass(frozen=True)
class ListArrays:
    """Items of consecutive lists; list ``i`` is rows ``offsets[i]:offsets[i + 1]``."""

    features: np.ndarray
    label: np.ndarray
    relevance: np.ndarray
    qid: np.ndarray
    offsets: np.ndarray

    @property
    def num_lists(self) -> int:
        return len(self.qid)

    @property
    def sizes(self) -> np.ndarray:
        """Items per list (LightGBM's query groups)."""
        return np.diff(self.offsets)

    def list_labels(self) -> np.ndarray:
        """``t = max_i y_i`` per list (0 for an empty list)."""
        t = np.zeros(self.num_lists, np.float32)
        nonempty = self.sizes > 0
        if self.label.size:
            t[nonempty] = np.maximum.reduceat(self.label, self.offsets[:-1][nonempty])
        return t

    def select(self, keep: np.ndarray) -> ListArrays:
        """The lists where the ``[num_lists]`` bool array ``keep`` is True."""
        rows = np.repeat(keep, self.sizes)
        return ListArrays(
            features=self.features[rows],
            label=self.label[rows],
            relevance=self.relevance[rows],
            qid=self.qid[keep],
            offsets=np.concatenate([[0], np.cumsum(self.sizes[keep])]).astype(np.int64),
        )

    def slice_lists(self, start: int, stop: int) -> ListArrays:
        """Lists ``start:stop`` (contiguous rows, no copy)."""
        begin, end = self.offsets[start], self.offsets[stop]
        return ListArrays(
            features=self.features[begin:end],
            label=self.label[begin:end],
            relevance=self.relevance[begin:end],
            qid=self.qid[start:stop],
            offsets=self.offsets[start : stop + 1] - begin,
        )

    def mask(self) -> np.ndarray:
        """``[num_lists, max_list]`` bool, True for real items."""
        width = int(self.sizes.max(initial=0))
        return np.arange(width)[np.newaxis, :] < self.sizes[:, np.newaxis]

    def padded(self, values: np.ndarray, fill) -> np.ndarray:
        """Per-item ``values`` ``[num_items, ...]`` as ``[num_lists, max_list, ...]``."""
        mask = self.mask()
        out = np.full(mask.shape + values.shape[1:], fill, dtype=values.dtype)
        out[mask] = values
        return out


def read_split(
    data_dir: str, manifest: Manifest, split: str, *, batch_size: int = 512
) -> ListArrays:
    """Every item of every list of ``split``, in file order, nothing cut."""
    parts: dict[str, list] = {"features": [], "label": [], "relevance": [], "qid": [], "size": []}
    num_features = manifest.num_features
    for batch in data.evaluation_dataset(
        data_dir, manifest, split=split, batch_size=batch_size, by_length=False
    ):
        mask = batch[MASK].numpy()
        parts["features"].append(batch[FEATURES].numpy()[mask])
        parts["label"].append(batch[LABEL].numpy()[mask])
        parts["relevance"].append(batch[RELEVANCE].numpy()[mask])
        parts["qid"].append(batch[QID].numpy())
        parts["size"].append(mask.sum(axis=1))
    if not parts["qid"]:
        return ListArrays(
            features=np.zeros((0, num_features), np.float32),
            label=np.zeros(0, np.float32),
            relevance=np.zeros(0, np.float32),
            qid=np.zeros(0, np.int64),
            offsets=np.zeros(1, np.int64),
        )
    sizes = np.concatenate(parts["size"])
    return ListArrays(
        features=np.concatenate(parts["features"]).astype(np.float32, copy=False),
        label=np.concatenate(parts["label"]),
        relevance=np.concatenate(parts["relevance"]),
        qid=np.concatenate(parts["qid"]).astype(np.int64),
        offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
    )
