"""RankFormer and listwise learning-to-rank peers on TensorFlow-Ranking.

The public names (``__all__``) are imported from their modules on first use (PEP 562), so
``import tfr_rankformer`` loads no TensorFlow; every other name may change.

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

import ast as _ast
import importlib as _importlib
import os as _os
from typing import TYPE_CHECKING

# TensorFlow's pooled (BFC) CPU allocator, asked for before TensorFlow makes its first
# tensor: by default each large CPU tensor of a training step pays for fresh pages in faults.
_os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

__version__ = "0.1.0"

# Literal, so that linters and type checkers read it; a test checks it against _LAZY.
__all__ = [
    "__version__",
    "Manifest",
    "load_manifest",
    "training_dataset",
    "evaluation_dataset",
    "ModelConfig",
    "build_model",
    "get_score_loss",
    "OrdinalListLoss",
    "ModelSpec",
    "ModelFamily",
    "model_names",
    "register_model",
    "register_family",
    "TrainConfig",
    "TextConfig",
    "train",
    "evaluate",
    "export_run",
    "predict",
    "RunMetrics",
    "evaluate_rankings",
    "export_model",
    "SIGNATURE_ELWC",
    "SIGNATURE_TENSORS",
    "letor_lists",
    "padded_tensors",
    "rest_tensor_body",
    "grpc_tensor_request",
    "rest_outputs",
    "grpc_outputs",
    "list_scores",
    "wait_until_available",
    "ClientTokenizer",
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
    from tfr_rankformer.serving.client_tokenizer import ClientTokenizer
    from tfr_rankformer.serving.export import export_model
    from tfr_rankformer.serving.serving_client import wait_until_available
    from tfr_rankformer.serving.serving_requests import (
        SIGNATURE_ELWC,
        SIGNATURE_TENSORS,
        grpc_outputs,
        grpc_tensor_request,
        letor_lists,
        list_scores,
        padded_tensors,
        rest_outputs,
        rest_tensor_body,
    )
    from tfr_rankformer.training.text_config import TextConfig
    from tfr_rankformer.training.train_config import TrainConfig


def _lazy_names() -> dict[str, str]:
    """Public name -> its module, read from the ``TYPE_CHECKING`` imports above (the one
    place that pairs them)."""
    with open(__file__, encoding="utf-8") as f:
        tree = _ast.parse(f.read())
    block = next(node for node in tree.body if isinstance(node, _ast.If))
    imports = [node for node in block.body if isinstance(node, _ast.ImportFrom)]
    return {alias.name: str(node.module) for node in imports for alias in node.names}


_LAZY = _lazy_names()


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
