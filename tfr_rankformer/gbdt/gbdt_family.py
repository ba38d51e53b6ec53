"""``GbdtFamily``: LightGBM runs, evaluated and scored from their ``model.txt`` (no export)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import numpy as np

from tfr_rankformer.core.config_io import read_settings
from tfr_rankformer.core.model_spec import ModelFamily
from tfr_rankformer.core.run_layout import CONFIG_NAME
from tfr_rankformer.gbdt.gbdt_booster import (
    MODEL_FILE,
    evaluate_arrays,
    is_gbdt_run,
    load_booster,
    score_arrays,
)
from tfr_rankformer.gbdt.lightgbm_ranker import train_gbdt
from tfr_rankformer.inputs.list_arrays import ListArrays, read_split
from tfr_rankformer.inputs.manifest import Manifest
from tfr_rankformer.inputs.record_checks import RecordFileError, read_records
from tfr_rankformer.ranking.evaluation import RunEvaluator
from tfr_rankformer.serving.prediction import ScoredList, ServedModel, batched
from tfr_rankformer.training.training_setup import data_evaluator

BATCH_SIZE = 256  # lists per booster call when ``predict`` is not told


@dataclasses.dataclass(frozen=True)
class GbdtFamily:
    """LightGBM runs: ``model_dir/model.txt`` beside ``config.json``."""

    record: ModelFamily

    def owns(self, path: str) -> bool:
        return is_gbdt_run(path)

    def train(self, config, *, final_weights=None, callbacks=None, existing="refuse", **_) -> dict:
        if final_weights:
            raise ValueError("final_weights: for the neural models only")
        return train_gbdt(config, callbacks=callbacks, existing=existing)

    def evaluator(self, model_dir: str, data_dir: str | None) -> RunEvaluator:
        config = read_settings(os.path.join(model_dir, CONFIG_NAME))
        booster = load_booster(model_dir)

        def evaluate(directory: str, manifest: Manifest, split: str) -> dict:
            arrays = read_split(directory, manifest, split)
            scores = score_arrays(booster, arrays)
            return evaluate_arrays(scores, arrays, max_label=manifest.label_levels)

        return data_evaluator(config["data"], booster.num_feature(), data_dir, evaluate)

    def export(
        self, model_dir: str, *, version: int | None, invalid_items: str, precision: str
    ) -> str:
        raise ValueError(
            f"{model_dir} is a GBDT run: tfr-predict scores its {MODEL_FILE} as it is, "
            "there is nothing to export"
        )

    def load(self, path: str) -> ServedModel:
        booster = load_booster(path)
        return ServedModel(
            os.path.join(path, MODEL_FILE), self.record.kind, booster.num_feature(), booster
        )

    def score(self, served: ServedModel, lists, files, batch_size: int | None):
        """Scores raw-feature ``lists`` or ELWC ``files`` (checked as ``score_elwc`` rejects)."""
        if files is not None:
            d = served.model.num_feature()
            records = ((path, n, record) for path in files for n, record in read_records(path))
            lists = (_elwc_list(*record, d) for record in records)
        return _gbdt_lists(served.model, lists, batch_size or BATCH_SIZE)


def _gbdt_lists(booster, lists, batch_size: int) -> Iterator[ScoredList]:
    """Scores ``(qid, docids, [n, d] raw features)`` lists, one LightGBM call a batch."""
    for batch in batched(lists, batch_size):
        offsets = np.cumsum([0, *(len(docids) for _, docids, _ in batch)], dtype=np.int64)
        features = np.concatenate([x for _, _, x in batch])
        empty = np.zeros(len(features), np.float32)
        arrays = ListArrays(features, empty, empty, np.array([q for q, _, _ in batch]), offsets)
        scores = score_arrays(booster, arrays)
        for i, (qid, docids, _) in enumerate(batch):
            yield ScoredList(qid, docids, scores[offsets[i] : offsets[i + 1]])


def _elwc_list(path: str, number: int, record: bytes, num_features: int):
    """``(qid, docids, [n, d] features)`` of one ELWC record, its items numbered in list order
    and checked as the serving signature checks them (``RecordFileError``)."""
    from tensorflow_serving.apis import input_pb2

    elwc = input_pb2.ExampleListWithContext.FromString(record)
    qid = elwc.context.features.feature["qid"].int64_list.value
    rows = np.zeros((len(elwc.examples), num_features), np.float32)
    for i, example in enumerate(elwc.examples):
        feature = example.features.feature.get("features")
        values = feature.float_list.value if feature is not None else []
        if len(values) != num_features:
            what = "is missing (0 values)" if not values else f"holds {len(values)} values"
            raise RecordFileError(
                path, number, f"item {i}: the features field {what}, expected {num_features}"
            )
        rows[i] = values
        if not np.isfinite(rows[i]).all():
            j = int(np.flatnonzero(~np.isfinite(rows[i]))[0])
            what = f"holds {rows[i, j]} at position {j + 1} of {num_features}"
            raise RecordFileError(
                path, number, f"item {i}: the features field {what}, expected finite values"
            )
    docids = [str(j) for j in range(1, len(rows) + 1)]
    return int(qid[0]) if qid else -1, docids, rows
