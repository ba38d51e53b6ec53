"""The registry's records, ``ModelFamily`` and ``ModelSpec``, and ``RunFamily``, what a
family class provides; classes and builders may be ``"module:name"`` paths, imported on use.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

Target = str | Callable


def load_object(target: Target):
    """``target`` itself when callable, else what a ``"package.module:name"`` path names."""
    if callable(target):
        return target
    module, sep, attribute = str(target).partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"a plug-in path reads 'package.module:name', got {target!r}")
    return getattr(importlib.import_module(module), attribute)


def _check_name(record) -> None:
    if not isinstance(record.name, str) or not record.name:
        what = type(record).__name__
        raise ValueError(f"a {what}'s `name` must be a non-empty string, got {record.name!r}")


@dataclasses.dataclass(frozen=True)
class ModelFamily:
    """A kind of model and the class that trains, evaluates, exports and serves it.

    Attributes:
      name: the name its models' ``ModelSpec.family`` gives.
      kind: one of ``model_families.KINDS``: the data its models read.
      family: the ``RunFamily`` class (or its path), built with this record.
      default: whether it takes the runs and exports no other family's ``owns`` claims.
      mixed_precision: whether its models may train in bf16 or float16.
      architecture: its ``TrainConfig.architecture`` class (``ModelConfig`` or a subclass).
    """

    name: str
    kind: str
    family: Target
    default: bool = False
    mixed_precision: bool = True
    architecture: Target = "tfr_rankformer.model.model_config:ModelConfig"

    def __post_init__(self):
        _check_name(self)

    def load(self) -> RunFamily:
        """The family object (its module imported now)."""
        return load_object(self.family)(self)


class RunFamily(Protocol):
    """What a family class provides: ``runner`` calls the first six, the training loop of
    the neural kinds the rest."""

    record: ModelFamily

    def owns(self, path: str) -> bool: ...  # whether a run directory or export is its own

    def train(self, config, **options) -> dict: ...

    def evaluator(self, model_dir: str, data_dir: str | None) -> Any: ...  # a RunEvaluator

    def export(
        self, model_dir: str, *, version: int | None, invalid_items: str, precision: str
    ) -> str: ...

    def load(self, path: str) -> Any: ...  # a ServedModel

    def score(self, served, lists, files, batch_size: int | None): ...  # ScoredLists

    def prepare(self, config, *, worker) -> Any: ...  # data, settings and plan

    def write_start(self, run) -> None: ...  # files besides config.json

    def build(self, run, *, steps_per_epoch: int, xla: bool) -> tuple: ...  # (model, fitted)

    def training_data(self, run, model, cache_dir: str): ...  # (inputs, targets) batches

    def validation(self, run, model): ...  # the callback adding val_* metrics

    def evaluate(self, run, model, splits: tuple[str, ...]) -> dict: ...

    def fitting(self, run): ...  # a context the fit runs in

    def summary(self, run) -> dict: ...  # added to metrics.json's training entry


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model name: its family, defaults and traits.

    Attributes:
      name: the ``--model`` name.
      family: the name of a registered ``ModelFamily``.
      has_list_head: whether the model predicts the list label (``alpha`` > 0).
      builder: the Keras builder (or its path), ``(num_features, config, levels,
        item_levels) -> model``; ``None`` for GBDTs.
      architecture: ``ModelConfig`` defaults; ``loss_architecture``: per loss, over them.
      training: ``TrainConfig`` defaults.
      alpha: the default ``alpha`` per loss scaling (absent: 0).
      attention: whether items attend to each other (``False``: pointwise).
      item_width: the setting that is the encoder's width (``None``: the feature count).
      takes_cls_token: whether a list gets a [CLS] token when ``cls_token`` is set.
      summary_tokens: whether ``global_tokens`` summary tokens join [CLS].
      positional_encoding: whether the model takes ``positional_encoding``.
      cls_token_with_list_head: whether an unset ``cls_token`` follows the list head.
      slate_size: the training list cap when nothing else sets one (``None``: whole lists).
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
    positional_encoding: bool = False
    cls_token_with_list_head: bool = False
    slate_size: int | None = None

    def __post_init__(self):
        _check_name(self)
        for name in ("architecture", "loss_architecture", "training", "alpha"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def load_builder(self) -> Callable:
        """The model's builder (its module imported now)."""
        if self.builder is None:
            raise ValueError(f"{self.name!r} has no Keras builder")
        return load_object(self.builder)
