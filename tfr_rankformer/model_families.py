"""The model-family registry: every model name, its family, and what each plugs in.

A family (``ModelFamily``) is a kind of run: ``features`` (models over
feature vectors, trained by the one training loop), ``text`` (models over text
lists, the same loop) or ``gbdt`` (LightGBM). It names, as lazily imported
``"package.module:attribute"`` paths (or zero-argument callables), its
runner plug-in (``run_kinds``: training, evaluation, export, opening an export
and scoring with it) and, for the neural kinds, its plug-in to the training
loop (``run_family.RunFamily``). A model (``ModelSpec``) belongs to a family
and carries its defaults and the traits the memory model, the settings'
checks and the search read.

The builtin families and models are registered by ``builtin_families``,
imported here, so the registry is always full. A new model or family is
added in one place, with ``register_family`` and ``register_model`` (see
``docs/adding_a_model.md``). No TensorFlow is imported here: the command lines
read their choices from the registry at parse time.

>>> get_model("rankformer").has_list_head, is_text("listformer"), is_gbdt("gbdt-1k")
(True, True, True)
>>> get_model("bert")
Traceback (most recent call last):
ValueError: Unknown model 'bert'; choose from ['context_aware', 'gbdt', 'gbdt-10k', \
'gbdt-1k', 'listformer', 'mlp', 'rankformer', 'summary_token_ranker', 'transformer']
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType

__all__ = [
    "FEATURES_KIND",
    "GBDT_KIND",
    "KINDS",
    "MODEL_NAMES",
    "TEXT_MODEL_NAMES",
    "NEURAL_KINDS",
    "TEXT_KIND",
    "ModelFamily",
    "ModelSpec",
    "families",
    "family_of",
    "get_family",
    "get_model",
    "has_list_head",
    "is_gbdt",
    "is_neural",
    "is_text",
    "load_object",
    "model_names",
    "register_family",
    "register_model",
    "trainable_names",
    "unregister_family",
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
    """

    name: str
    kind: str
    runs: Target
    run_family: Target | None = None
    default: bool = False

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

    @property
    def kind(self) -> str:
        """The family's kind (``features``, ``text`` or ``gbdt``)."""
        return get_family(self.family).kind

    def load_builder(self) -> Callable:
        """The model's builder (its module imported now)."""
        if self.builder is None:
            raise ValueError(f"{self.name!r} has no Keras builder")
        return load_object(self.builder)


_FAMILIES: dict[str, ModelFamily] = {}
_MODELS: dict[str, ModelSpec] = {}


def register_family(family: ModelFamily) -> ModelFamily:
    """Adds ``family``; returns it.

    Raises:
      ValueError: a family of that name exists, or a second default family.
    """
    if family.name in _FAMILIES:
        raise ValueError(f"family {family.name!r} is already registered")
    if family.default and any(f.default for f in _FAMILIES.values()):
        raise ValueError(f"family {family.name!r}: there is a default family already")
    _FAMILIES[family.name] = family
    return family


def register_model(spec: ModelSpec) -> ModelSpec:
    """Adds the model ``spec``; returns it.

    Raises:
      ValueError: the name is taken, or its family is not registered.
    """
    if spec.name in _MODELS:
        raise ValueError(f"model {spec.name!r} is already registered")
    get_family(spec.family)
    _MODELS[spec.name] = spec
    return spec


def unregister_family(name: str) -> None:
    """Removes the family ``name`` and its models (a plug-in's or a test's own)."""
    get_family(name)
    for model in [m for m, spec in _MODELS.items() if spec.family == name]:
        del _MODELS[model]
    del _FAMILIES[name]


def get_family(name: str) -> ModelFamily:
    """The family ``name``.

    Raises:
      ValueError: for an unknown family.
    """
    if name not in _FAMILIES:
        raise ValueError(f"Unknown model family {name!r}; choose from {sorted(_FAMILIES)}")
    return _FAMILIES[name]


def get_model(name: str) -> ModelSpec:
    """The model ``name``'s spec.

    Raises:
      ValueError: for an unknown model.
    """
    if name not in _MODELS:
        raise ValueError(f"Unknown model {name!r}; choose from {sorted(_MODELS)}")
    return _MODELS[name]


def families() -> tuple[ModelFamily, ...]:
    """The registered families, in registration order."""
    return tuple(_FAMILIES.values())


def family_of(name: str) -> ModelFamily:
    """The family of the model ``name`` (``ValueError`` for an unknown model)."""
    return get_family(get_model(name).family)


def model_names(kind: str | Iterable[str] | None = None) -> tuple[str, ...]:
    """The registered model names, sorted: all, or those of ``kind`` (one or several)."""
    kinds = None if kind is None else ({kind} if isinstance(kind, str) else set(kind))
    return tuple(sorted(n for n, s in _MODELS.items() if kinds is None or s.kind in kinds))


def trainable_names() -> list[str]:
    """What ``tfr-train --model`` takes: the neural models, then the GBDTs, each sorted."""
    return [*model_names(NEURAL_KINDS), *model_names(GBDT_KIND)]


def _kind_of(name: str) -> str | None:
    spec = _MODELS.get(name) if isinstance(name, str) else None
    return None if spec is None else spec.kind


def is_text(name: str) -> bool:
    """Whether the model ``name`` ranks text lists (``False`` for unknown names)."""
    return _kind_of(name) == TEXT_KIND


def is_gbdt(name: str) -> bool:
    """Whether ``name`` is a GBDT model (``False`` for unknown names)."""
    return _kind_of(name) == GBDT_KIND


def is_neural(name: str) -> bool:
    """Whether ``name`` is a Keras model of the training loop (``False`` for unknown names)."""
    return _kind_of(name) in NEURAL_KINDS


def has_list_head(name: str) -> bool:
    """Whether the model ``name`` predicts the list label (``ValueError`` if unknown)."""
    return get_model(name).has_list_head


class _LiveNames(Sequence):
    """The sorted names of the models of some kinds, read from the registry at each
    use (so a model registered later is in them)."""

    def __init__(self, kinds: tuple[str, ...]):
        self._kinds = kinds

    def __getitem__(self, index):
        return model_names(self._kinds)[index]

    def __len__(self) -> int:
        return len(model_names(self._kinds))

    def __eq__(self, other) -> bool:
        if isinstance(other, (tuple, list, _LiveNames)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return repr(model_names(self._kinds))


# The neural models (feature vectors and text), and the text models.
MODEL_NAMES = _LiveNames(NEURAL_KINDS)
TEXT_MODEL_NAMES = _LiveNames((TEXT_KIND,))


def __getattr__(name: str):
    """``GBDT_MODELS``: each GBDT model's preset, read from the registry when asked
    (PEP 562)."""
    if name == "GBDT_MODELS":
        return {n: _MODELS[n].preset or n for n in model_names(GBDT_KIND)}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


from tfr_rankformer import builtin_families  # noqa: E402,F401  (registers the builtins)
