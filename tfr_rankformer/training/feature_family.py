"""The feature-vector models' plug-in points in the training loop (``run_family``).

The RankFormer, its peers and allRank's ranker train on ELWC lists of feature
vectors (``inputs.data``). The ranker (the model without its normalisation
layer) is what ``fit`` trains, on features normalised once per list in the
input pipeline; evaluation and the checkpoints use the whole model on raw
features.
"""

from __future__ import annotations

import contextlib
import os

import tensorflow as tf

from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.empty_splits import without_empty_splits
from tfr_rankformer.model import compiled_ops, packed_items
from tfr_rankformer.model.models import normalization_of
from tfr_rankformer.model.table_search import pipeline_normalization
from tfr_rankformer.ranking.evaluation import EvaluationCallback
from tfr_rankformer.training.run_family import PreparedRun
from tfr_rankformer.training.run_plan import plan_run, shuffle_lists
from tfr_rankformer.training.training_setup import (
    build_compiled_model,
    evaluate_splits,
    item_levels,
)

__all__ = ["FeatureFamily"]


class FeatureFamily:
    """Feature-vector lists: ``tfr-convert``'s ELWC with a ``manifest.json``."""

    name = "features"

    def prepare(self, config, *, worker) -> PreparedRun:
        # An empty train split is refused, empty vali and test splits left out.
        manifest = without_empty_splits(data.load_manifest(config.data), data_dir=config.data)
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
            # Without lists in memory, lists too large to cache in memory are
            # cached on disk for the run.
            cache_file=os.path.join(cache_dir, "train"),
            worker=run.extra,  # the worker's shard of the files
            pad_to_longest=not config.length_buckets,
            lists_in_memory=config.lists_in_memory,
        )

    def validation(self, run: PreparedRun, model) -> tf.keras.callbacks.Callback:
        config = run.config
        vali = data.evaluation_dataset(
            config.data,
            run.data,
            split="vali",
            batch_size=config.eval_batch_size,
            batch_items=config.evaluation_batch_items(),
        )
        return EvaluationCallback(
            vali, max_label=run.levels, list_head=config.uses_list_head, model=model
        )

    def evaluate(self, run: PreparedRun, model, splits: tuple[str, ...]) -> dict:
        return evaluate_splits(run.config, run.data, model, splits)

    def fitting(self, run: PreparedRun):
        # XLA's compiled pieces compile once per batch shape: worth it for one shape
        # (one bucket; batches padded to their longest list take a shape each).
        # Batches of many shapes carry padding instead: their encoder layers run the
        # item-wise parts on the valid items alone (packed_items).
        buckets = sum(1 for count in run.plan.batches.counts if count)
        one_shape = buckets == 1 and run.config.length_buckets
        stack = contextlib.ExitStack()
        stack.enter_context(compiled_ops.default(one_shape))
        stack.enter_context(packed_items.default(not one_shape))
        return stack

    def summary(self, run: PreparedRun) -> dict:
        return {}
