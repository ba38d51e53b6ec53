"""The models (``NAME[:KEY=VALUE...]``, as ``--models``' help says), folds and settings of a
``tfr-experiment``."""

from __future__ import annotations

import dataclasses
import re

from pipelines.cli_common import json_value
from tfr_rankformer.core import model_families
from tfr_rankformer.core.command_names import (
    BM25_MODEL,
    DEFAULT_EXPERIMENT_MODELS,
    DEFAULT_TEXT_EXPERIMENT_MODELS,
)
from tfr_rankformer.core.config_io import setting
from tfr_rankformer.text.bm25 import Bm25Config
from tfr_rankformer.training.train_config import ARCHITECTURE_FIELDS, TEXT_FIELDS, TrainConfig

# The keys a neural model's spec takes: ``TrainConfig.from_flat``'s flat settings.
_TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)} - {"text"}
_BM25_FIELDS = {f.name for f in dataclasses.fields(Bm25Config)}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One row of the table: its label as given, the model, its settings (training settings
    or LightGBM parameters) or a ``tfr-tune`` result's."""

    label: str
    model: str
    settings: tuple = ()
    tuned: dict | None = None  # best_config.json's settings; data, run and seed are set here

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9.=_-]+", "_", self.label.replace(":", "_"))

    @property
    def is_gbdt(self) -> bool:
        return model_families.is_gbdt(self.model)

    @property
    def is_bm25(self) -> bool:
        return self.model == BM25_MODEL

    @property
    def is_text(self) -> bool:
        return self.is_bm25 or model_families.is_text(self.model)

    @property
    def is_neural(self) -> bool:
        return not (self.is_gbdt or self.is_bm25)


def parse_models(text: str) -> list[ModelSpec]:
    """``"gbdt-1k,rankformer:alpha=4"`` -> model specs; ``ValueError`` naming an unknown
    model, a malformed or unknown setting, or a repeat."""
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
            settings.append((key, json_value(value)))
        if name == BM25_MODEL:
            Bm25Config(**dict(settings))  # a bad value is an error now, not after training
        specs.append(ModelSpec(item, name, tuple(settings)))
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels) or not specs:
        raise ValueError(f"--models must name distinct models, got {text!r}")
    return specs


def parse_folds(text: str) -> list[int]:
    """``"1-5"``, ``"1,3"`` or ``"2"`` -> fold numbers (``ValueError`` for anything else)."""
    folds: list[int] = []
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        if not low.isdigit() or (sep and not high.isdigit()):
            raise ValueError(f"--folds takes e.g. 1-5 or 1,3, got {text!r}")
        folds += range(int(low), int(high) + 1) if sep else [int(low)]
    if not folds or min(folds) < 1:
        raise ValueError(f"--folds takes fold numbers from 1, got {text!r}")
    return sorted(set(folds))


_MODELS_HELP = (
    "comma-separated NAME[:KEY=VALUE...]: neural models with tfr-train settings (e.g. "
    "rankformer:alpha=4:loss=lambdarank) or GBDTs with LightGBM parameters (e.g. "
    "gbdt-1k:num_leaves=63); on text data bm25 (k1, b, method) and listformer (tfr-train "
    "settings, e.g. listformer:width=64:max_document_tokens=64). Default: "
    f"{DEFAULT_EXPERIMENT_MODELS}; on text data {DEFAULT_TEXT_EXPERIMENT_MODELS}"
)


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """Settings of one experiment (each field's help says what it is)."""

    dataset: str = setting(
        dataclasses.MISSING,
        "a LETOR directory, a dataset name (looked up under --data-dir, $TFR_DATA_DIR, the "
        "working directory), synthetic, text data (synthetic-text, or trec:DIR: the TREC "
        "layout's files found in DIR by their usual names), or a tfr-convert output to use "
        "as it is",
        required=True,
    )
    output: str = setting(dataclasses.MISSING, "the experiment's directory", required=True)
    models: str | None = setting(None, _MODELS_HELP)
    folds: str = setting("1-5", "e.g. 1-5 or 1,3")
    seeds: int = setting(1, "runs per model and fold (seeds 0 .. seeds - 1)")
    epochs: int | None = setting(
        None,
        "neural models' epochs. Default: each model's (200, the RankFormer paper; "
        "context_aware: 100, allRank; listformer: 20)",
    )
    batch_size: int | None = setting(
        None,
        "lists per batch. Default: each model's (2048; context_aware: 64; listformer: 16)",
    )
    patience: int | None = setting(
        None, "early-stopping patience in epochs. Default: tfr-train's (20)"
    )
    simulate_clicks: bool = setting(
        True,
        "keep the original labels (the paper's Appendix A) instead of simulating clicks "
        "(text data always keeps its relevance judgements, and refuses this)",
        flag="--no-simulation",
        action="store_false",
    )
    data_dir: str | None = setting(None, "where dataset names are looked up")
    synthetic_lists: int = setting(
        300,
        "train lists of --dataset synthetic or synthetic-text (vali and test get a third each)",
    )
    tuned: str | None = setting(
        None,
        "a tfr-tune output, or a directory of them: each best_config.json joins the table "
        "as a 'tuned <model>' row, trained on every fold with its tuned settings",
        metavar="DIR",
    )

    def __post_init__(self):
        if self.models is not None:
            parse_models(self.models)
        parse_folds(self.folds)
        if self.seeds < 1:
            raise ValueError(f"`seeds` must be >= 1, got {self.seeds}")

    def model_specs(self, *, text: bool) -> list[ModelSpec]:
        """The table's rows on text lists (``text``) or feature vectors: ``models`` (or the
        kind's default), then the ``tuned`` ones; ``ValueError`` for a model of the other
        kind or a repeated label."""
        default = DEFAULT_TEXT_EXPERIMENT_MODELS if text else DEFAULT_EXPERIMENT_MODELS
        specs = parse_models(self.models if self.models is not None else default)
        if self.tuned:
            from tfr_rankformer.tuning.optuna_search import load_tuned

            specs += [ModelSpec(label, s["model"], tuned=s) for label, s in load_tuned(self.tuned)]
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
