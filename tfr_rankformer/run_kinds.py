"""The runner's plug-ins, one per kind of run (``model_families.ModelFamily.runs``).

Each trains its runs, opens them to evaluate, exports them, opens a model to
score with, and scores lists with it; ``owns(path)`` says whether a run
directory or an export is its kind's (the feature-vector plug-in claims
nothing: its family is the default one, which takes whatever no other claims).
``runner`` looks the plug-in up in the registry and calls it.
"""

from __future__ import annotations

import os

import numpy as np

from tfr_rankformer.core.model_families import FEATURES_KIND, GBDT_KIND, TEXT_KIND
from tfr_rankformer.core.run_layout import is_text_run, is_token_id_export
from tfr_rankformer.gbdt.gbdt_booster import MODEL_FILE, is_gbdt_run, load_booster
from tfr_rankformer.gbdt.lightgbm_ranker import train_gbdt
from tfr_rankformer.ranking.evaluation import RunEvaluator
from tfr_rankformer.serving import export
from tfr_rankformer.serving.client_tokenizer import ClientTokenizer
from tfr_rankformer.serving.prediction import (
    ServedModel,
    load_export,
    resolve_export,
    score_elwc,
    score_elwc_gbdt,
    score_lists,
    score_lists_gbdt,
    score_text_lists,
    signature_num_features,
    tensor_signature,
    text_inputs,
    text_signature,
)
from tfr_rankformer.text.text_export import export_text_run
from tfr_rankformer.text.text_runs import text_run_evaluator
from tfr_rankformer.text.text_tokenizer import register_text_ops
from tfr_rankformer.training import loop
from tfr_rankformer.training.feature_runs import feature_run_evaluator, gbdt_run_evaluator

__all__ = ["FeatureRuns", "TextRuns", "GbdtRuns"]

# Lists per model call when ``predict`` is not told: evaluation's sizes.
_BATCH_SIZE = 256
_TEXT_BATCH_SIZE = 16


class FeatureRuns:
    """Feature-vector runs: the one training loop, ELWC and tensor exports."""

    kind = FEATURES_KIND

    def owns(self, path: str) -> bool:
        del path  # the default family's: what no other family claims
        return False

    def train(self, config, **options) -> dict:
        return loop.train(config, **options)

    def evaluator(self, model_dir: str, data_dir: str | None) -> RunEvaluator:
        return feature_run_evaluator(model_dir, data_dir)

    def export(self, model_dir: str, *, version: int | None, invalid_items: str) -> str:
        return export.export_run(model_dir, version=version, invalid_items=invalid_items)

    def load(self, path: str) -> ServedModel:
        path = resolve_export(path)
        saved = load_export(path)
        return ServedModel(path, self.kind, signature_num_features(tensor_signature(saved)), saved)

    def score(self, served: ServedModel, lists, files, batch_size: int | None):
        batch_size = batch_size or _BATCH_SIZE
        if files is not None:
            return score_elwc(served.model, files, batch_size=batch_size)
        return score_lists(tensor_signature(served.model), lists, batch_size=batch_size)


class TextRuns(FeatureRuns):
    """Text runs: the same loop, raw-string and token-id exports."""

    kind = TEXT_KIND

    def owns(self, path: str) -> bool:
        return is_text_run(path)

    def evaluator(self, model_dir: str, data_dir: str | None) -> RunEvaluator:
        return text_run_evaluator(model_dir, data_dir)

    def export(self, model_dir: str, *, version: int | None, invalid_items: str) -> str:
        del invalid_items  # no item features to check
        return export_text_run(model_dir, version=version)

    def load(self, path: str) -> ServedModel:
        path = resolve_export(path)
        if is_token_id_export(path):
            tokenizer = ClientTokenizer.from_export(path)
            return ServedModel(path, self.kind, None, load_export(path), tokenizer)
        register_text_ops()  # its graph tokenises with TF Text's ops
        return ServedModel(path, self.kind, None, load_export(path))

    def score(self, served: ServedModel, lists, files, batch_size: int | None):
        if files is not None:
            raise ValueError(f"{served.path} scores text lists, not ELWC files")
        signature = text_signature(served.model)
        inputs = text_inputs if served.tokenizer is None else _token_id_inputs(served.tokenizer)
        batch_size = batch_size or _TEXT_BATCH_SIZE
        return score_text_lists(signature, lists, batch_size=batch_size, inputs=inputs)


class GbdtRuns(FeatureRuns):
    """LightGBM runs: trained by ``lightgbm_ranker``, scored from ``model.txt``."""

    kind = GBDT_KIND

    def owns(self, path: str) -> bool:
        return is_gbdt_run(path)

    def train(self, config, *, final_weights=None, callbacks=None, existing="refuse", **_) -> dict:
        if final_weights:
            raise ValueError("final_weights: for the neural models only")
        return train_gbdt(config, callbacks=callbacks, existing=existing)

    def evaluator(self, model_dir: str, data_dir: str | None) -> RunEvaluator:
        return gbdt_run_evaluator(model_dir, data_dir)

    def load(self, path: str) -> ServedModel:
        booster = load_booster(path)
        return ServedModel(
            os.path.join(path, MODEL_FILE), self.kind, booster.num_feature(), booster
        )

    def score(self, served: ServedModel, lists, files, batch_size: int | None):
        batch_size = batch_size or _BATCH_SIZE
        if files is not None:
            return score_elwc_gbdt(served.model, files, batch_size=batch_size)
        return score_lists_gbdt(served.model, lists, batch_size=batch_size)


def _token_id_inputs(tokenizer: ClientTokenizer):
    """A token-id export's inputs for a batch of queries and document lists (as
    ``text_inputs`` gives a raw-string export's), tokenised by ``tokenizer``."""

    def inputs(queries: list[str], documents: list[list[str]]) -> dict:
        encoded = tokenizer.encode(queries, documents)
        ids = np.array(encoded["document_ids"], np.int32)
        if ids.ndim < 3:  # no document in the batch: [B, 0, 1]
            ids = ids.reshape(len(queries), 0, 1)
        return {
            "query_ids": np.array(encoded["query_ids"], np.int32),
            "document_ids": ids,
            "document_mask": np.array(encoded["document_mask"], bool).reshape(ids.shape[:2]),
        }

    return inputs
