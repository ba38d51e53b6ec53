"""``FeatureFamily``: the feature-vector models on ``tfr-convert``'s ELWC lists."""

from __future__ import annotations

import contextlib
import dataclasses
import os

import tensorflow as tf

from tfr_rankformer.core.model_spec import ModelFamily
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.empty_splits import without_empty_splits
from tfr_rankformer.inputs.manifest import Manifest, load_manifest
from tfr_rankformer.model import compiled_ops, packed_items
from tfr_rankformer.model.models import normalization_of
from tfr_rankformer.model.table_search import pipeline_normalization
from tfr_rankformer.ranking.evaluation import EvaluationCallback, RunEvaluator, evaluate_model
from tfr_rankformer.serving import export
from tfr_rankformer.serving.prediction import (
    ServedModel,
    resolve_export,
    score_elwc,
    score_lists,
    signature_num_features,
)
from tfr_rankformer.serving.serving_requests import SIGNATURE_TENSORS
from tfr_rankformer.training import loop
from tfr_rankformer.training.loop import PreparedRun
from tfr_rankformer.training.run_plan import plan_run, shuffle_lists
from tfr_rankformer.training.training_setup import (
    build_compiled_model,
    data_evaluator,
    item_levels,
    load_run,
)

BATCH_SIZE = 256  # lists per model call when ``predict`` is not told: evaluation's


@dataclasses.dataclass(frozen=True)
class FeatureFamily:
    """Feature-vector lists: ``tfr-convert``'s ELWC with a ``manifest.json``."""

    record: ModelFamily

    # === Runner ===

    def owns(self, path: str) -> bool:
        return False  # the default family's: what no other family claims

    def train(self, config, **options) -> dict:
        return loop.train(config, self, **options)

    def evaluator(self, model_dir: str, data_dir: str | None) -> RunEvaluator:
        config, manifest, model = load_run(model_dir)

        def evaluate(directory: str, manifest: Manifest, split: str) -> dict:
            return _metrics(config, directory, manifest, model, split)

        limit = config.architecture.list_limit()
        return data_evaluator(config.data, manifest.num_features, data_dir, evaluate, limit)

    def export(
        self, model_dir: str, *, version: int | None, invalid_items: str, precision: str
    ) -> str:
        if precision != "float32":
            raise ValueError(
                f"--precision {precision}: {model_dir} is a feature-vector run, whose exports "
                "compute in float32 (bf16 exports are for text runs)"
            )
        return export.export_run(model_dir, version=version, invalid_items=invalid_items)

    def load(self, path: str) -> ServedModel:
        path = resolve_export(path)
        saved = tf.saved_model.load(path)
        num_features = signature_num_features(saved.signatures[SIGNATURE_TENSORS])
        return ServedModel(path, self.record.kind, num_features, saved)

    def score(self, served: ServedModel, lists, files, batch_size: int | None):
        batch_size = batch_size or BATCH_SIZE
        if files is not None:
            return score_elwc(served.model, files, batch_size=batch_size)
        return score_lists(served.model.signatures[SIGNATURE_TENSORS], lists, batch_size=batch_size)

    # === Training loop ===

    def prepare(self, config, *, worker) -> PreparedRun:
        # An empty train split is refused, empty vali and test splits left out.
        manifest = without_empty_splits(load_manifest(config.data), data_dir=config.data)
        plan = plan_run(config, manifest, data_dir=config.data, worker=worker)
        splits = tuple(sorted(manifest.splits, key=lambda s: s != "train"))
        return PreparedRun(config, plan, manifest.label_levels, splits, manifest, extra=worker)

    def write_start(self, run: PreparedRun) -> None:
        del run  # config.json is all a feature-vector run needs

    def build(self, run: PreparedRun, *, steps_per_epoch: int, xla: bool) -> tuple:
        return build_compiled_model(run.config, run.data, steps_per_epoch=steps_per_epoch, xla=xla)

    def training_data(self, run: PreparedRun, model, cache_dir: str) -> tf.data.Dataset:
        config, manifest = run.config, run.data
        return data.training_dataset(
            config.data,
            manifest,
            plan=run.plan.batches,
            list_cap=run.plan.cap,
            include_empty_lists=config.training_includes_empty_lists(),
            with_list_head=config.uses_list_head,
            with_item_levels=item_levels(config, manifest) is not None,
            keep_order=config.architecture.positional_encoding != "none",
            seed=config.seed,
            shuffle_buffer=shuffle_lists(manifest),
            normalize=pipeline_normalization(normalization_of(model)),
            # Lists too large to cache in memory are cached on disk for the run.
            cache_file=os.path.join(cache_dir, "train"),
            worker=run.extra,  # the worker's shard of the files
            pad_to_longest=not config.length_buckets,
            lists_in_memory=config.lists_in_memory,
        )

    def validation(self, run: PreparedRun, model) -> tf.keras.callbacks.Callback:
        vali = _evaluation_data(run.config, run.config.data, run.data, "vali")
        list_head = run.config.uses_list_head
        return EvaluationCallback(vali, max_label=run.levels, list_head=list_head, model=model)

    def evaluate(self, run: PreparedRun, model, splits: tuple[str, ...]) -> dict:
        return {s: _metrics(run.config, run.config.data, run.data, model, s) for s in splits}

    def fitting(self, run: PreparedRun):
        # XLA's compiled pieces compile once per batch shape: worth it for one shape.
        # Batches of many shapes run the item-wise parts on the valid items alone.
        buckets = sum(1 for count in run.plan.batches.counts if count)
        one_shape = buckets == 1 and run.config.length_buckets
        stack = contextlib.ExitStack()
        stack.enter_context(compiled_ops.default(one_shape))
        stack.enter_context(packed_items.default(not one_shape))
        return stack

    def summary(self, run: PreparedRun) -> dict:
        return {}


def _evaluation_data(config, directory: str, manifest: Manifest, split: str) -> tf.data.Dataset:
    batch_items = config.evaluation_batch_items()
    return data.evaluation_dataset(
        directory, manifest, split=split, batch_size=config.eval_batch_size, batch_items=batch_items
    )


def _metrics(config, directory: str, manifest: Manifest, model, split: str) -> dict:
    """The whole model's metrics on ``split`` of ``directory``."""
    dataset = _evaluation_data(config, directory, manifest, split)
    list_head = config.uses_list_head
    return evaluate_model(model, dataset, max_label=manifest.label_levels, list_head=list_head)
