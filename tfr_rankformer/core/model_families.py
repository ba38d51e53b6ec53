"""The model-family registry: every model name, its family, and the family's class; the
builtin ones are registered on import, others with ``register_family`` and
``register_model`` (``docs/contributing/adding_a_model.md``).

>>> get_model("rankformer").has_list_head, is_text("listformer"), is_gbdt("gbdt-1k")
(True, True, True)
>>> get_model("bert")
Traceback (most recent call last):
ValueError: Unknown model 'bert'; choose from ['context_aware', 'gbdt', 'gbdt-10k', \
'gbdt-1k', 'listformer', 'mlp', 'rankformer', 'summary_token_ranker', 'transformer']
"""

from __future__ import annotations

from collections.abc import Iterable

from tfr_rankformer.core import builtin_families
from tfr_rankformer.core.model_spec import ModelFamily, ModelSpec

FEATURES_KIND = "features"  # lists of feature vectors (ELWC from tfr-convert)
TEXT_KIND = "text"  # lists of query and document texts
GBDT_KIND = "gbdt"  # LightGBM boosters over feature vectors
KINDS = (FEATURES_KIND, TEXT_KIND, GBDT_KIND)
NEURAL_KINDS = (FEATURES_KIND, TEXT_KIND)  # trained by the one training loop

_FAMILIES: dict[str, ModelFamily] = {}
_MODELS: dict[str, ModelSpec] = {}


def register_family(family: ModelFamily) -> ModelFamily:
    """Adds ``family``; refuses an unknown kind, a taken name or a second default."""
    if family.kind not in KINDS:
        raise ValueError(f"`kind` must be one of {list(KINDS)}, got {family.kind!r}")
    if family.name in _FAMILIES:
        raise ValueError(f"family {family.name!r} is already registered")
    if family.default and any(f.default for f in _FAMILIES.values()):
        raise ValueError(f"family {family.name!r}: there is a default family already")
    _FAMILIES[family.name] = family
    return family


def register_model(spec: ModelSpec) -> ModelSpec:
    """Adds the model ``spec``; refuses a taken name or an unregistered family."""
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
    if name not in _FAMILIES:
        raise ValueError(f"Unknown model family {name!r}; choose from {sorted(_FAMILIES)}")
    return _FAMILIES[name]


def get_model(name: str) -> ModelSpec:
    if name not in _MODELS:
        raise ValueError(f"Unknown model {name!r}; choose from {sorted(_MODELS)}")
    return _MODELS[name]


def families() -> tuple[ModelFamily, ...]:
    """The registered families, in registration order."""
    return tuple(_FAMILIES.values())


def family_of(name: str) -> ModelFamily:
    """The family of the model ``name``."""
    return get_family(get_model(name).family)


def model_names(kind: str | Iterable[str] | None = None) -> tuple[str, ...]:
    """The registered model names, sorted: all, or those of ``kind`` (one or several)."""
    kinds = None if kind is None else ({kind} if isinstance(kind, str) else set(kind))
    return tuple(
        sorted(n for n, s in _MODELS.items() if kinds is None or _FAMILIES[s.family].kind in kinds)
    )


def trainable_names() -> list[str]:
    """What ``tfr-train --model`` takes: the neural models, then the GBDTs, each sorted."""
    return [*model_names(NEURAL_KINDS), *model_names(GBDT_KIND)]


def _kind_of(name: str) -> str | None:
    spec = _MODELS.get(name) if isinstance(name, str) else None
    return None if spec is None else _FAMILIES[spec.family].kind


# A model name's kind (``False`` for unknown names).
def is_text(name: str) -> bool:
    return _kind_of(name) == TEXT_KIND


def is_gbdt(name: str) -> bool:
    return _kind_of(name) == GBDT_KIND


def is_neural(name: str) -> bool:
    return _kind_of(name) in NEURAL_KINDS


for _family in builtin_families.FAMILIES:
    register_family(_family)
for _spec in builtin_families.MODELS:
    register_model(_spec)
