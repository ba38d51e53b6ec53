"""The models, folds and settings of a ``tfr-experiment``.

Models are given as ``NAME[:KEY=VALUE[:KEY=VALUE...]]``, e.g.
``rankformer:alpha=4`` or ``gbdt-1k:num_leaves=63``: the keys are
``tfr-train`` settings (architecture ones included) for neural models and
LightGBM parameters for GBDTs; ``tfr-tune`` outputs join as ``tuned <model>``
rows. On text data the models are ``bm25`` (keys: ``Bm25Config`` fields) and
the ``listformer`` (``tfr-train`` settings, its text settings such as
``max_document_tokens`` included).
"""

from __future__ import annotations

import dataclasses
import json
import re

from tfr_rankformer.core import model_families
from tfr_rankformer.core.command_names import (
    BM25_MODEL,
    DEFAULT_EXPERIMENT_MODELS,
    DEFAULT_TEXT_EXPERIMENT_MODELS,
)
from tfr_rankformer.text.bm25 import Bm25Config
from tfr_rankformer.training.train_config import ARCHITECTURE_FIELDS, TEXT_FIELDS, TrainConfig

__all__ = ["ModelSpec", "ExperimentConfig", "parse_models", "parse_folds", "tuned_specs"]

# The keys a neural model's spec takes: ``TrainConfig.from_flat``'s flat settings.
_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)} - {"text"}
_BM25_FIELDS = {f.name for f in dataclasses.fields(Bm25Config)}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One row of the table.

    Attributes:
      label: as given on the command line (the row's name).
      model: a neural model or a GBDT (``model_families``), or ``bm25``.
      settings: overrides: training settings or LightGBM parameters.
      tuned: a ``tfr-tune`` ``best_config.json``'s settings, used as they are
        (the experiment sets data, run directory and seed).
    """

    label: str
    model: str
    settings: tuple = ()
    tuned: dict | None = None

    @property
    def slug(self) -> str:
        """The label as a directory name."""
        return re.sub(r"[^A-Za-z0-9.=_-]+", "_", self.label.replace(":", "_"))

    @property
    def is_gbdt(self) -> bool:
        return model_families.is_gbdt(self.model)

    @property
    def is_bm25(self) -> bool:
        return self.model == BM25_MODEL

    @property
    def is_text(self) -> bool:
        """Whether the model ranks text lists (BM25, the Listformer), not feature vectors."""
        return self.is_bm25 or model_families.is_text(self.model)

    @property
    def is_neural(self) -> bool:
        return not (self.is_gbdt or self.is_bm25)


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_models(text: str) -> list[ModelSpec]:
    """``"gbdt-1k,rankformer:alpha=4"`` -> model specs.

    Raises:
      ValueError: naming an unknown model, a malformed or unknown setting, or a repeat.
    """
    specs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, *pairs = item.split(":")
        if name not in model_families.trainable_names() and name != BM25_MODEL:
            known = [*model_families.trainable_names(), BM25_MODEL]
            raise ValueError(f"Unknown model {name!r} in --models; choose from {known}")
        settings = []
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ValueError(f"{item!r}: settings take KEY=VALUE, got {pair!r}")
            if name == BM25_MODEL and key not in _BM25_FIELDS:
                raise ValueError(f"{item!r}: {key!r} is not a BM25 setting {sorted(_BM25_FIELDS)}")
            known = _TRAIN_FIELDS | set(ARCHITECTURE_FIELDS)
            known |= set(TEXT_FIELDS) if model_families.is_text(name) else set()
            if model_families.is_neural(name) and key not in known:
                raise ValueError(f"{item!r}: {key!r} is not a tfr-train setting")
            settings.append((key, _value(value)))
        if name == BM25_MODEL:
            Bm25Config(**dict(settings))  # a bad value is an error now, not after training
        specs.append(ModelSpec(item, name, tuple(settings)))
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels) or not specs:
        raise ValueError(f"--models must name distinct models, got {text!r}")
    return specs


def tuned_specs(directory: str) -> list[ModelSpec]:
    """Model specs of the ``tfr-tune`` outputs in ``directory`` (``tuning.load_tuned``)."""
    from tfr_rankformer.tuning.optuna_search import load_tuned

    return [
        ModelSpec(label, settings["model"], tuned=settings)
        for label, settings in load_tuned(directory)
    ]


def parse_folds(text: str) -> list[int]:
    """``"1-5"``, ``"1,3"`` or ``"2"`` -> fold numbers.

    Raises:
      ValueError: for anything else.
    """
    folds: list[int] = []
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"--folds takes e.g. 1-5 or 1,3, got {text!r}")
        folds += range(int(low), int(high) + 1) if sep else [int(low)]
    if not folds or min(folds) < 1:
        raise ValueError(f"--folds takes fold numbers from 1, got {text!r}")
    return sorted(set(folds))


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """Settings of one experiment.

    Attributes:
      dataset: a LETOR directory or dataset name (converted here), ``synthetic``,
        a text input (``synthetic-text`` or ``trec:DIR``, converted here), or a
        ``tfr-convert`` output (used as it is).
      output: the experiment's directory.
      models: model specs, as ``parse_models`` takes them; ``None``: the
        default grid of the dataset's kind (``DEFAULT_EXPERIMENT_MODELS``, or
        ``DEFAULT_TEXT_EXPERIMENT_MODELS`` on text data).
      folds: fold numbers, as ``parse_folds`` takes them (a dataset without
        folds has fold 1 only).
      seeds: runs per model and fold, with seeds 0 .. seeds - 1.
      epochs: neural models' epochs; ``None``: each model's default (200; 100
        for ``context_aware``).
      batch_size: neural models' lists per batch; ``None``: each model's
        default (2048; 64 for ``context_aware``).
      patience: epochs without a better validation NDCG_y@10 before stopping;
        ``None``: ``tfr-train``'s default.
      simulate_clicks: convert with the paper's click simulation (off: the
        original labels, the paper's Appendix A); text data keeps its relevance
        judgements, and turning this off there is an error.
      data_dir: where dataset names are looked up.
      synthetic_lists: train lists of a ``synthetic`` or ``synthetic-text``
        dataset (vali and test a third each).
      tuned: a ``tfr-tune`` output (or a directory of them) whose best
        configurations join the table as ``tuned <model>`` rows (see ``tuned_specs``).
    """

    dataset: str
    output: str
    models: str | None = None
    folds: str = "1-5"
    seeds: int = 1
    epochs: int | None = None
    batch_size: int | None = None
    patience: int | None = None
    simulate_clicks: bool = True
    data_dir: str | None = None
    synthetic_lists: int = 300
    tuned: str | None = None

    def __post_init__(self):
        if self.models is not None:
            parse_models(self.models)
        parse_folds(self.folds)
        if self.seeds < 1:
            raise ValueError(f"`seeds` must be >= 1, got {self.seeds}")

    def model_specs(self, *, text: bool) -> list[ModelSpec]:
        """The table's rows on a dataset of text lists (``text``) or of feature vectors:
        ``models`` (or the kind's default grid), then the ``tuned`` configurations.

        Raises:
          ValueError: naming the models that do not take the dataset's kind of
            lists, or labels that repeat.
        """
        default = DEFAULT_TEXT_EXPERIMENT_MODELS if text else DEFAULT_EXPERIMENT_MODELS
        specs = parse_models(self.models if self.models is not None else default)
        if self.tuned:
            specs += tuned_specs(self.tuned)
        wrong = [s.label for s in specs if s.is_text != text]
        if wrong:
            kind = "text lists" if text else "feature vectors"
            takes = "bm25 and listformer" if text else "every model but bm25 and listformer"
            raise ValueError(
                f"{self.dataset} holds {kind}: {', '.join(wrong)} cannot run on it ({takes} can)"
            )
        labels = [s.label for s in specs]
        if len(set(labels)) != len(labels):
            raise ValueError(f"model labels repeat: {labels}")
        return specs
