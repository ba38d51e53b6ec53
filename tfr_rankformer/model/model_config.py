"""``ModelConfig``, the feature-vector family's architecture settings (the text family's
extend them); a field left ``None`` takes the model's default (``resolved``).
"""

from __future__ import annotations

import argparse
import dataclasses

from tfr_rankformer.core import model_families
from tfr_rankformer.core.command_names import INITIALIZATIONS
from tfr_rankformer.core.config_io import check_fields, require_positive_ints, setting
from tfr_rankformer.core.model_spec import load_object
from tfr_rankformer.inputs.list_limit import ListLimit

# The value every model shares when its ``ModelSpec`` gives none.
_BASE = dict(
    num_layers=3,
    num_heads=1,
    ff_dim=512,
    dropout=0.25,
    head_hidden=128,
    mlp_units=(512, 256, 128),
    d_fc=144,
    positional_encoding="none",
    max_positions=1024,
    global_tokens=4,
    cls_token=True,
    final_norm=False,
    head_dropout=None,  # the model's `dropout`, as the released heads
    cls_stddev=1.0,
    init="pytorch",
    copied_layers=True,
)
POSITIONAL_ENCODINGS = ("none", "fixed", "learned")
_SWITCH = {"action": argparse.BooleanOptionalAction}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture settings; ``None`` takes the model's default (its ``ModelSpec``)."""

    _defaults = _BASE  # a class's own defaults, under every model's

    num_layers: int | None = setting(None, "encoder layers (blocks)")
    num_heads: int | None = setting(None, "attention heads")
    ff_dim: int | None = setting(None, "feed-forward width")
    dropout: float | None = setting(None, "dropout rate")
    head_hidden: int | None = setting(None, "hidden width of the heads")
    mlp_units: tuple | None = None  # the mlp baseline's hidden widths
    d_fc: int | None = setting(None, "context_aware: width of the input projection. Default: 144")
    positional_encoding: str | None = setting(
        None,
        "context_aware: encode each item's position in the input order (fixed: sinusoidal), "
        "for re-ranking a first stage's order; training lists are then cut to their first "
        "items, never sampled. Default: none (permutation-equivariant)",
        choices=list(POSITIONAL_ENCODINGS),
    )
    max_positions: int | None = setting(
        None,
        "longest list a learned positional encoding takes (context_aware), or the "
        "listformer's position embeddings (its token caps must stay below it). Default: "
        "1024; listformer: 512",
    )
    global_tokens: int | None = setting(
        None, "summary_token_ranker: learned summary tokens besides [CLS]. Default: 4"
    )
    cls_token: bool | None = setting(
        None,
        "rankformer, transformer: prepend the learnable [CLS] and score h_s(z_i || z_CLS) "
        "(needed by a list head). Default: only with a list head (alpha > 0), as the "
        "authors' code; --cls-token gives the transformer a [CLS] without a list head",
        **_SWITCH,
    )
    final_norm: bool | None = setting(
        None,
        "a LayerNorm after the last encoder layer. Default: none (the authors' code)",
        **_SWITCH,
    )
    head_dropout: float | None = setting(
        None,
        "dropout between the heads' ReLU and output layer. Default: --dropout (the authors' "
        "code); 0: none",
    )
    cls_stddev: float | None = setting(
        None,
        "standard deviation of the [CLS] vector's initial values. Default: 1 (the authors' "
        "torch.nn.Embedding)",
    )
    init: str | None = setting(
        None,
        "weight initialisation: pytorch (torch.nn.Linear's, the authors' code) or keras "
        "(Glorot-uniform, zero biases). Default: pytorch; context_aware: keras (allRank's "
        "Xavier)",
        choices=list(INITIALIZATIONS),
    )
    copied_layers: bool | None = setting(
        None,
        "every encoder layer starts from the first layer's initial weights, as in the "
        "authors' code (torch.nn.TransformerEncoder deep-copies its layer) and allRank (its "
        "clones). Default: on; listformer: off. --no-copied-layers draws each layer's "
        "weights on its own",
        **_SWITCH,
    )

    def __post_init__(self):
        check_fields(self)
        names = ("num_layers", "num_heads", "ff_dim", "head_hidden", "d_fc", "max_positions")
        require_positive_ints(self, *names, optional=True)
        if self.global_tokens is not None and self.global_tokens < 0:
            raise ValueError(f"`global_tokens` must be an int >= 0, got {self.global_tokens!r}")
        for name in ("dropout", "head_dropout"):
            rate = getattr(self, name)
            if rate is not None and not 0.0 <= rate < 1.0:
                raise ValueError(f"`{name}` must lie in [0, 1), got {rate!r}")
        if self.cls_stddev is not None and not self.cls_stddev > 0:
            raise ValueError(f"`cls_stddev` must be > 0, got {self.cls_stddev!r}")
        if self.mlp_units is not None:
            object.__setattr__(self, "mlp_units", tuple(self.mlp_units))

    @classmethod
    def of(cls, settings) -> ModelConfig:
        """``settings`` (a dict or another family's) as ``cls``, others' own fields left out."""
        if type(settings) is cls:
            return settings
        if dataclasses.is_dataclass(settings):
            settings = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
        own = {f.name for f in dataclasses.fields(cls)}
        others = {name for c in _classes() for name in c.__dataclass_fields__} - own
        return cls(**{k: v for k, v in settings.items() if k not in others})

    def resolved(self, model: str, loss: str | None = None) -> ModelConfig:
        """Every ``None`` replaced by ``model``'s default (for ``loss``), as its family's class."""
        check_model_name(model)
        cls = architecture_class(model)
        if type(self) is not cls:
            return cls.of(self).resolved(model, loss)
        spec = model_families.get_model(model)
        defaults = {**self._defaults, **spec.architecture, **spec.loss_architecture.get(loss, {})}
        values = {
            f.name: defaults[f.name] if getattr(self, f.name) is None else getattr(self, f.name)
            for f in dataclasses.fields(self)
        }
        if values["positional_encoding"] != "none" and not spec.positional_encoding:
            takes = [n for n in _neural_names() if model_families.get_model(n).positional_encoding]
            raise ValueError(f"{model!r} takes no positional encoding ({', '.join(takes)} does)")
        if values["head_dropout"] is None:
            values["head_dropout"] = values["dropout"]
        if spec.summary_tokens and not values["cls_token"]:
            raise ValueError(f"{model}'s [CLS] is one of its global tokens: it needs `cls_token`")
        return cls(**values)

    def list_limit(self) -> ListLimit | None:
        """The most items a list may hold (``None``: any): a learned position table's."""
        if self.positional_encoding != "learned":
            return None
        return ListLimit(
            self.max_positions,
            f"its learned positional encoding's --max-positions {self.max_positions}",
            "set --max-positions {longest} or more, or --positional-encoding fixed (--list-size "
            "cuts only training lists: evaluation scores whole ones)",
        )

    def for_run(self, model: str, loss, list_head: bool, pretrained: bool) -> ModelConfig:
        """``resolved`` for a run: a [CLS] that comes with the list head only with it."""
        config = self
        if model_families.get_model(model).cls_token_with_list_head and config.cls_token is None:
            config = dataclasses.replace(config, cls_token=list_head)
        config = config.resolved(model, loss)
        if list_head and not config.cls_token:
            raise ValueError(
                "alpha > 0: the list head reads the [CLS] token, so `cls_token` is needed"
            )
        return config


def _neural_names() -> tuple[str, ...]:
    return model_families.model_names(model_families.NEURAL_KINDS)


def architecture_class(model: str) -> type[ModelConfig]:
    """The architecture settings class of ``model``'s family (its module imported now)."""
    return load_object(model_families.family_of(model).architecture)


def _classes() -> list[type[ModelConfig]]:
    """The neural families' architecture classes, in registration order."""
    families = model_families.families()
    return [load_object(f.architecture) for f in families if f.kind in model_families.NEURAL_KINDS]


def architecture_fields() -> tuple[str, ...]:
    """Every neural family's architecture setting, each once, in field order."""
    return tuple(dict.fromkeys(f.name for c in _classes() for f in dataclasses.fields(c)))


def check_model_name(name: str) -> None:
    """Raises ``ValueError`` unless ``name`` is a neural model (feature vectors or text)."""
    if not model_families.is_neural(name):
        raise ValueError(f"Unknown model {name!r}; choose from {list(_neural_names())}")
