"""The records of the model-family registry (``model_families``): ``ModelFamily``,
a kind of run and its plug-ins, and ``ModelSpec``, one model name's family,
defaults and traits. No TensorFlow: plug-ins and builders are named by
``"package.module:name"`` paths and imported by ``load_object`` when used.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType

__all__ = [
    "FEATURES_KIND",
    "GBDT_KIND",
    "KINDS",
    "NEURAL_KINDS",
    "TEXT_KIND",
    "ModelFamily",
    "ModelSpec",
    "load_object",
]

FEATURES_KIND = "features"  # lists of feature vectors (ELWC from tfr-convert)
TEXT_KIND = "text"  # lists of query and document texts
GBDT_KIND = "gbdt"  # LightGBM boosters over feature vectors
KINDS = (FEATURES_KIND, TEXT_KIND, GBDT_KIND)
# The kinds a Keras model is trained for, by the one training loop.
NEURAL_KINDS = (FEATURES_KIND, TEXT_KIND)

Target = str | Callable


def load_object(target: Target):
    """``target`` itself when callable, else the attribute a ``"package.module:name"``
    path names, imported now.

    Raises:
      ValueError: for a path without ``:``.
    """
    if callable(target):
        return target
    module, sep, attribute = str(target).partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"a plug-in path reads 'package.module:name', got {target!r}")
    return getattr(importlib.import_module(module), attribute)


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    """A kind of run and the plug-ins that train, evaluate, export and serve it.

    Attributes:
      name: the family's name (``model_names``' models name it).
      kind: ``features``, ``text`` or ``gbdt``: the data its models read and the
        scoring their exports take.
      runs: a zero-argument factory (or its ``"module:name"`` path) of the
        runner plug-in: ``owns(path)``, ``train(config, **options)``,
        ``evaluator(model_dir, data_dir)``, ``export(model_dir, *, version,
        invalid_items)``, ``load(path)`` and ``score(served, lists, files,
        batch_size)`` (see ``run_kinds``).
      run_family: for the neural kinds, a zero-argument factory (or its path) of
        the training loop's ``run_family.RunFamily``.
      default: the family of runs and exports no other family's ``owns`` claims
        (the feature-vector family).
      mixed_precision: whether its models may train in bf16 or float16
        (``precision``); ``False``: always float32, a visible GPU included.
    """

    name: str
    kind: str
    runs: Target
    run_family: Target | None = None
    default: bool = False
    mixed_precision: bool = True

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a family's `name` must be a non-empty string, got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"`kind` must be one of {list(KINDS)}, got {self.kind!r}")
        if self.kind in NEURAL_KINDS and self.run_family is None:
            raise ValueError(f"family {self.name!r}: a {self.kind} family needs `run_family`")

    def load_runs(self):
        """The runner plug-in (its module imported now)."""
        return load_object(self.runs)()

    def load_run_family(self):
        """The training loop's plug-in (its module imported now)."""
        if self.run_family is None:
            raise ValueError(f"family {self.name!r} is not trained by the training loop")
        return load_object(self.run_family)()


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model name: its family, defaults and traits.

    Attributes:
      name: the ``--model`` name.
      family: the name of a registered ``ModelFamily``.
      has_list_head: whether the model predicts the list label (``alpha`` > 0).
      builder: the model's builder, or its ``"module:name"`` path. Feature
        vectors: ``(num_features, config, levels, item_levels)`` -> the ranker,
        a Keras model on ``{"features": [B, L, d] normalised, "mask": [B, L]}``
        (``models.build_model`` adds the normalisation); text: see
        ``listformer.build_text_model``. ``None`` for GBDTs.
      architecture: ``ModelConfig`` defaults (fields left ``None`` take them).
      loss_architecture: per score loss, ``ModelConfig`` defaults that replace
        ``architecture``'s with that loss.
      training: ``TrainConfig`` defaults (fields left ``None`` take them).
      alpha: the default ``alpha`` per loss scaling (absent: 0).
      attention: whether items attend to each other (``False``: a pointwise
        model; no encoder in its memory model or its search space).
      item_width: the architecture setting that is the encoder's width
        (``None``: the feature count).
      takes_cls_token: whether a list gets a [CLS] token when ``cls_token`` is set.
      summary_tokens: whether ``global_tokens`` summary tokens join [CLS] (which
        is then required).
      heads_split_width: whether ``num_heads`` must divide ``item_width``.
      positional_encoding: whether the model takes ``positional_encoding``.
      cls_token_with_list_head: whether ``cls_token`` left unset follows
        whether the list head is used.
      slate_size: the training list cap when neither ``list_size`` nor a click
        simulation sets one (``None``: whole lists).
      preset: a GBDT's LightGBM preset (``None``: the ``preset`` setting's).
    """

    name: str
    family: str
    has_list_head: bool = False
    builder: Target | None = None
    architecture: Mapping = dataclasses.field(default_factory=dict)
    loss_architecture: Mapping = dataclasses.field(default_factory=dict)
    training: Mapping = dataclasses.field(default_factory=dict)
    alpha: Mapping = dataclasses.field(default_factory=dict)
    attention: bool = True
    item_width: str | None = None
    takes_cls_token: bool = True
    summary_tokens: bool = False
    heads_split_width: bool = False
    positional_encoding: bool = False
    cls_token_with_list_head: bool = False
    slate_size: int | None = None
    preset: str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a model's `name` must be a non-empty string, got {self.name!r}")
        for name in ("architecture", "loss_architecture", "training", "alpha"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def load_builder(self) -> Callable:
        """The model's builder (its module imported now)."""
        if self.builder is None:
            raise ValueError(f"{self.name!r} has no Keras builder")
        return load_object(self.builder)
