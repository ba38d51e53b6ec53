"""RankFormer and listwise learning-to-rank peers on TensorFlow-Ranking.

The public names are listed in ``__all__``: runs (``TrainConfig``, ``train``,
``evaluate``, ``export_run``, ``predict``), models (``build_model``,
``ModelConfig``, ``MODEL_NAMES``), losses, ranking metrics, ``tf.data`` input
from ELWC TFRecords, and ``export_model`` for a model trained on any
``tf.data`` pipeline.

``import tfr_rankformer`` stays light: it loads neither TensorFlow nor
TF-Ranking (the converter imports ``tfr_rankformer.core.elwc_schema`` and the
commands' ``--help`` must start fast). Each public name is imported from its
module on first use (PEP 562). Importing the package asks TensorFlow for its
pooled CPU allocator (see ``cpu_allocator``).

>>> import tfr_rankformer
>>> tfr_rankformer.MODEL_NAMES[:2]
('context_aware', 'listformer')
>>> tfr_rankformer.ModelConfig(num_layers=1).resolved("rankformer").num_heads
1
>>> round(tfr_rankformer.ndcg_at_k([0.2, 0.9, 0.1], [1, 0, 2], k=None), 4)
0.5869
"""

from tfr_rankformer.core.cpu_allocator import use_pooled_cpu_allocator

use_pooled_cpu_allocator()

import importlib as _importlib  # noqa: E402

from tfr_rankformer.core import elwc_schema  # noqa: E402

__version__ = "0.1.0"

# The public names, by topic, under the module that defines each.
_MODULES = {
    # Runs: one entry point for numeric and text (Listformer) runs.
    "tfr_rankformer.runner": ("train", "evaluate", "export_run", "predict"),
    "tfr_rankformer.training.train_config": ("TrainConfig",),
    # Models and their settings.
    "tfr_rankformer.model.models": ("build_model", "has_list_head"),
    "tfr_rankformer.model.layers": ("PADDING_SCORE",),
    "tfr_rankformer.model.model_config": ("ModelConfig",),
    "tfr_rankformer.core.command_names": ("LOSS_SCALINGS",),
    # The model-family registry: every model name, its family and traits.
    "tfr_rankformer.core.model_families": (
        "MODEL_NAMES",
        "TEXT_MODEL_NAMES",
        "ModelFamily",
        "ModelSpec",
        "get_model",
        "model_names",
        "register_family",
        "register_model",
    ),
    "tfr_rankformer.text.listformer": ("build_text_model",),
    "tfr_rankformer.training.text_config": ("TextConfig",),
    # Losses.
    "tfr_rankformer.ranking.losses": (
        "SCORE_LOSSES",
        "ScoreLoss",
        "get_score_loss",
        "OrdinalListLoss",
        "ListNetLoss",
        "ScaledSigmoidRMSE",
        "PerListLoss",
        "ListAverage",
    ),
    # Metrics: the paper's NDCG_y, NDCG_r and list-head metrics, and the
    # validation callback training uses.
    "tfr_rankformer.ranking.ranking_metrics": ("evaluate_rankings", "ndcg_at_k", "dcg_gains"),
    "tfr_rankformer.ranking.evaluation": ("evaluate_model", "predict_lists", "EvaluationCallback"),
    # Input: the model's input names and tf.data from ELWC TFRecords.
    "tfr_rankformer.core.elwc_schema": ("FEATURES", "PADDING_LABEL"),
    "tfr_rankformer.inputs.manifest": ("Manifest", "load_manifest", "label_levels"),
    "tfr_rankformer.inputs.list_parsing": ("MASK", "parsed_lists"),
    "tfr_rankformer.inputs.data": ("training_dataset", "evaluation_dataset"),
    "tfr_rankformer.inputs.batching": ("BatchPlan", "plan_batches", "bucket_edges"),
    # Serving.
    "tfr_rankformer.serving.model_export": ("export_model",),
    "tfr_rankformer.serving.export": ("SIGNATURE_ELWC", "SIGNATURE_TENSORS"),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

__all__ = ["__version__", "elwc_schema", *_LAZY]


def __getattr__(name: str):
    """Imports a public name's module on first use (PEP 562) and keeps the name."""
    module = _LAZY.get(name)
    if module is None:
        # An AttributeError lets ``from tfr_rankformer import data`` import the submodule.
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
