"""RankFormer and listwise learning-to-rank peers on TensorFlow-Ranking.

The public names, in ``__all__``, are grouped as a user meets them:

- data: ``Manifest`` and ``load_manifest`` (a converted dataset's
  description), ``training_dataset`` and ``evaluation_dataset`` (``tf.data``
  from its ELWC TFRecords);
- models: ``ModelConfig``, ``build_model``, the item-score losses
  (``get_score_loss``) and the RankFormer's listwide loss
  (``OrdinalListLoss``), and the model-family registry (``model_names``,
  ``ModelSpec``, ``ModelFamily``, ``register_model``, ``register_family``);
- training: ``TrainConfig`` (with ``TextConfig`` for text runs), ``train``,
  ``evaluate``, what they return (``RunMetrics``) and the paper's metrics
  over any scores (``evaluate_rankings``);
- serving: ``export_run``, ``export_model`` for a model trained on any
  ``tf.data`` pipeline, ``predict``, and the exports' signature names.

Everything else is importable from its module (``docs/layout.md``) but may
change between releases.

``import tfr_rankformer`` stays light: it loads neither TensorFlow nor
TF-Ranking (the converter imports ``tfr_rankformer.core.elwc_schema`` and the
commands' ``--help`` must start fast). Each public name is imported from its
module on first use (PEP 562); type checkers read the same names from the
``TYPE_CHECKING`` imports below. Importing the package asks TensorFlow for its
pooled CPU allocator (see ``core.cpu_allocator``).

>>> import tfr_rankformer
>>> "rankformer" in tfr_rankformer.model_names()
True
>>> tfr_rankformer.ModelConfig(num_layers=1).resolved("rankformer").num_heads
1
>>> scores, labels = [[0.2, 0.9, 0.1]], [[1, 0, 2]]
>>> mask = [[True, True, True]]
>>> round(tfr_rankformer.evaluate_rankings(scores, labels, labels, mask)["ndcg_y@1"], 2)
0.0
"""

from tfr_rankformer.core.cpu_allocator import use_pooled_cpu_allocator

use_pooled_cpu_allocator()

import importlib as _importlib  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

__version__ = "0.1.0"

# The public names, by group, under the module that defines each.
_MODULES = {
    # === Data ===
    "tfr_rankformer.inputs.manifest": ("Manifest", "load_manifest"),
    "tfr_rankformer.inputs.data": ("training_dataset", "evaluation_dataset"),
    # === Models ===
    "tfr_rankformer.model.model_config": ("ModelConfig",),
    "tfr_rankformer.model.models": ("build_model",),
    "tfr_rankformer.ranking.losses": ("get_score_loss", "OrdinalListLoss"),
    "tfr_rankformer.core.model_spec": ("ModelSpec", "ModelFamily"),
    "tfr_rankformer.core.model_families": ("model_names", "register_model", "register_family"),
    # === Training ===
    "tfr_rankformer.training.train_config": ("TrainConfig",),
    "tfr_rankformer.training.text_config": ("TextConfig",),
    "tfr_rankformer.runner": ("train", "evaluate", "export_run", "predict"),
    "tfr_rankformer.core.run_results": ("RunMetrics",),
    "tfr_rankformer.ranking.ranking_metrics": ("evaluate_rankings",),
    # === Serving ===
    "tfr_rankformer.serving.export": ("SIGNATURE_ELWC", "SIGNATURE_TENSORS", "export_model"),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

# Literal, so that linters and type checkers read it; a test checks it against _MODULES.
__all__ = [
    "__version__",
    # Data
    "Manifest",
    "load_manifest",
    "training_dataset",
    "evaluation_dataset",
    # Models
    "ModelConfig",
    "build_model",
    "get_score_loss",
    "OrdinalListLoss",
    "model_names",
    "ModelSpec",
    "ModelFamily",
    "register_model",
    "register_family",
    # Training
    "TrainConfig",
    "TextConfig",
    "train",
    "evaluate",
    "RunMetrics",
    "evaluate_rankings",
    # Serving
    "export_run",
    "export_model",
    "predict",
    "SIGNATURE_ELWC",
    "SIGNATURE_TENSORS",
]

if TYPE_CHECKING:  # the names as type checkers and IDEs see them
    from tfr_rankformer.core.model_families import model_names, register_family, register_model
    from tfr_rankformer.core.model_spec import ModelFamily, ModelSpec
    from tfr_rankformer.core.run_results import RunMetrics
    from tfr_rankformer.inputs.data import evaluation_dataset, training_dataset
    from tfr_rankformer.inputs.manifest import Manifest, load_manifest
    from tfr_rankformer.model.model_config import ModelConfig
    from tfr_rankformer.model.models import build_model
    from tfr_rankformer.ranking.losses import OrdinalListLoss, get_score_loss
    from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings
    from tfr_rankformer.runner import evaluate, export_run, predict, train
    from tfr_rankformer.serving.export import SIGNATURE_ELWC, SIGNATURE_TENSORS, export_model
    from tfr_rankformer.training.text_config import TextConfig
    from tfr_rankformer.training.train_config import TrainConfig


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
