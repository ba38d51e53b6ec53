"""Reading a Hugging Face BERT-family checkpoint directory (``config.json``,
``model.safetensors``, ``vocab.txt``, optional ``tokenizer_config.json``) without TensorFlow;
a bad field or weight is named with its file. Weights stay NumPy ``[out, in]`` arrays.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np
from safetensors.numpy import load_file

from tfr_rankformer.core.config_io import read_settings
from tfr_rankformer.text.listformer_config import ACTIVATIONS
from tfr_rankformer.text.text_tokenizer import UNKNOWN, read_vocabulary

__all__ = [
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "VOCAB_FILE",
    "SIZES",
    "BertCheckpoint",
    "read_bert_checkpoint",
    "dense_values",
    "norm_values",
    "layer_values",
    "attention_names",
    "token_types",
    "assign_values",
]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
PREFIX = "bert."
CLS, SEP = "[CLS]", "[SEP]"
_WORDS = "embeddings.word_embeddings.weight"
_TOKEN_TYPES = "embeddings.token_type_embeddings.weight"
# config.json field -> BertCheckpoint attribute: the sizes the Listformer takes.
SIZES = {
    "hidden_size": "width",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "ff_dim",
    "vocab_size": "vocab_size",
    "max_position_embeddings": "max_positions",
}


@dataclasses.dataclass(frozen=True)
class BertCheckpoint:
    """A checked checkpoint: its sizes, ``vocab.txt`` in id order, whether it lower-cases,
    and its weights without ``bert.``."""

    directory: str
    width: int
    num_layers: int
    num_heads: int
    ff_dim: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_epsilon: float
    activation: str
    vocabulary: tuple
    lower_case: bool
    weights: dict = dataclasses.field(repr=False, compare=False)

    def token_id(self, token: str) -> int:
        """The id of ``token`` in ``vocab.txt``."""
        return self.vocabulary.index(token)


def _int_field(path: str, values: dict, name: str, *, minimum: int = 1) -> int:
    if name not in values:
        raise ValueError(f"{path}: missing field {name!r}")
    value = values[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{path}: field {name!r} must be an int >= {minimum}, got {value!r}")
    return value


def _read_config(path: str) -> dict:
    """The Listformer's settings from ``config.json``; unsupported values refused."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist: not a Hugging Face checkpoint directory")
    values = read_settings(path)
    settings = {attribute: _int_field(path, values, name) for name, attribute in SIZES.items()}
    fixed = {"model_type": "bert", "position_embedding_type": "absolute"}
    for name, supported in fixed.items():
        if values.get(name, supported) != supported:
            raise ValueError(
                f"{path}: field {name!r} is {values[name]!r}; only {supported!r} is supported"
            )
    if settings["width"] % settings["num_heads"]:
        raise ValueError(
            f"{path}: field 'hidden_size' {settings['width']} is not divisible by "
            f"'num_attention_heads' {settings['num_heads']}"
        )
    activation = values.get("hidden_act", "gelu")
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"{path}: field 'hidden_act' is {activation!r}; supported: {list(ACTIVATIONS)}"
        )
    epsilon = values.get("layer_norm_eps", 1e-12)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon > 0:
        raise ValueError(f"{path}: field 'layer_norm_eps' must be a number > 0, got {epsilon!r}")
    types = 2  # Hugging Face's default
    if "type_vocab_size" in values:
        types = _int_field(path, values, "type_vocab_size", minimum=0)
    return dict(
        settings, activation=activation, layer_norm_epsilon=float(epsilon), type_vocab_size=types
    )


def _expected_shapes(settings: dict) -> dict:
    """Weight name -> shape, as a BERT of ``_read_config``'s sizes saves them."""
    width, ff_dim, types = settings["width"], settings["ff_dim"], settings["type_vocab_size"]
    shapes = {
        _WORDS: (settings["vocab_size"], width),
        "embeddings.position_embeddings.weight": (settings["max_positions"], width),
    }
    if types:
        shapes[_TOKEN_TYPES] = (types, width)
    biased = {"embeddings.LayerNorm": (width,)}  # a weight of this shape and a bias
    for i in range(settings["num_layers"]):
        for name, shape in {
            "attention.self.query": (width, width),
            "attention.self.key": (width, width),
            "attention.self.value": (width, width),
            "attention.output.dense": (width, width),
            "attention.output.LayerNorm": (width,),
            "intermediate.dense": (ff_dim, width),
            "output.dense": (width, ff_dim),
            "output.LayerNorm": (width,),
        }.items():
            biased[f"encoder.layer.{i}.{name}"] = shape
    for name, shape in biased.items():
        shapes[f"{name}.weight"], shapes[f"{name}.bias"] = shape, shape[:1]
    return shapes


def _read_weights(path: str, settings: dict, config_path: str) -> dict:
    """The weights the Listformer takes, float32, checked against ``settings``'s shapes."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist")
    try:
        stored = load_file(path)
    except Exception as error:  # the package's own errors name no file
        raise ValueError(f"{path}: not a readable safetensors file ({error})") from error
    if _WORDS not in stored and PREFIX + _WORDS in stored:
        stored = {name[len(PREFIX) :]: v for name, v in stored.items() if name.startswith(PREFIX)}
    if _TOKEN_TYPES not in stored:  # token types are optional
        settings["type_vocab_size"] = 0
    weights = {}
    for name, shape in _expected_shapes(settings).items():
        if name not in stored:
            raise ValueError(
                f"{path}: missing weight {name!r} (or {PREFIX + name!r}), which "
                f"{config_path} implies"
            )
        value = stored[name]
        if value.shape != shape:
            raise ValueError(
                f"{path}: weight {name!r} has shape {value.shape}, but {config_path} "
                f"implies {shape}"
            )
        if not np.issubdtype(value.dtype, np.floating):
            raise ValueError(f"{path}: weight {name!r} is {value.dtype}, not floating-point")
        weights[name] = value.astype(np.float32)
    return weights


def _lower_case(path: str, vocabulary: list[str]) -> bool:
    """Whether the checkpoint's tokenizer lower-cases; its unsupported settings refused."""
    settings = read_settings(path) if os.path.isfile(path) else {}
    for name in ("do_basic_tokenize", "tokenize_chinese_chars"):
        if settings.get(name, True) is not True:
            raise ValueError(
                f"{path}: field {name!r} is {settings[name]!r}; only true is supported"
            )
    for name, token in (("unk_token", UNKNOWN), ("cls_token", CLS), ("sep_token", SEP)):
        value = settings.get(name, token)  # a string or {"content": ...}
        if (value.get("content") if isinstance(value, dict) else value) != token:
            raise ValueError(f"{path}: field {name!r} must be {token!r}, got {settings[name]!r}")
    lower = settings.get("do_lower_case")
    if lower is None:  # an uncased vocabulary has no upper-case letter outside [SPECIAL] tokens
        lower = not any(t != t.lower() for t in vocabulary if not t.startswith("["))
    elif not isinstance(lower, bool):
        raise ValueError(f"{path}: field 'do_lower_case' must be true or false, got {lower!r}")
    strip = settings.get("strip_accents")
    if strip is not None and strip != lower:  # BertTokenizer strips accents iff it lower-cases
        raise ValueError(
            f"{path}: field 'strip_accents' {strip!r} differs from 'do_lower_case' {lower!r}; "
            "only accents stripped with lower-casing are supported"
        )
    return lower


def _read_vocabulary(path: str, vocab_size: int, config_path: str) -> list[str]:
    vocabulary = read_vocabulary(path)
    if len(vocabulary) > vocab_size:
        raise ValueError(
            f"{path} has {len(vocabulary)} tokens, more than {config_path}'s field "
            f"'vocab_size' {vocab_size}"
        )
    for token in (CLS, SEP):
        if token not in vocabulary:
            raise ValueError(f"{path}: the vocabulary has no {token} token")
    return vocabulary


def read_bert_checkpoint(directory: str) -> BertCheckpoint:
    """The checkpoint in ``directory``; errors name the file and the bad field or weight."""
    config_path = os.path.join(directory, CONFIG_FILE)
    settings = _read_config(config_path)
    weights = _read_weights(os.path.join(directory, WEIGHTS_FILE), settings, config_path)
    vocabulary = _read_vocabulary(
        os.path.join(directory, VOCAB_FILE), settings["vocab_size"], config_path
    )
    lower_case = _lower_case(os.path.join(directory, TOKENIZER_CONFIG_FILE), vocabulary)
    checkpoint = BertCheckpoint(
        directory=directory,
        vocabulary=tuple(vocabulary),
        lower_case=lower_case,
        weights=weights,
        **settings,
    )
    sizes = [settings[k] for k in ("num_layers", "width", "num_heads", "ff_dim")]
    case = "lower-cased" if lower_case else "cased"
    message = "read %s: %d layers, width %d, %d heads, feed-forward %d, %d tokens (%s)"
    logger.info(message, directory, *sizes, len(vocabulary), case)
    return checkpoint


def dense_values(layer, weights: dict, *names: str) -> list:
    """``(variable, value, source)`` of a Dense layer from ``[out, in]`` weights side by side."""
    kernel = np.concatenate([weights[f"{n}.weight"].T for n in names], axis=1)  # [in, out]
    bias = np.concatenate([weights[f"{n}.bias"] for n in names])
    source = " + ".join(names)
    return [(layer.kernel, kernel, f"{source}.weight"), (layer.bias, bias, f"{source}.bias")]


def norm_values(layer, weights: dict, name: str) -> list:
    """``(variable, value, source)`` of a LayerNorm."""
    return [
        (layer.gamma, weights[f"{name}.weight"], f"{name}.weight"),
        (layer.beta, weights[f"{name}.bias"], f"{name}.bias"),
    ]


def layer_values(layer, weights: dict, index: int) -> list:
    """``(variable, value, source)`` of encoder layer ``index`` (a layer with BERT's parts)."""
    prefix = f"encoder.layer.{index}."
    return [
        *dense_values(layer.qkv, weights, *attention_names(index)),
        *dense_values(layer.attention_out, weights, prefix + "attention.output.dense"),
        *norm_values(layer.norm_attention, weights, prefix + "attention.output.LayerNorm"),
        *dense_values(layer.ff_in, weights, prefix + "intermediate.dense"),
        *dense_values(layer.ff_out, weights, prefix + "output.dense"),
        *norm_values(layer.norm_ff, weights, prefix + "output.LayerNorm"),
    ]


def token_types(checkpoint: BertCheckpoint) -> np.ndarray:
    """``[2, D]``: token types 0 and 1 (0 again if it is the only one; zeros without any)."""
    types = checkpoint.weights.get(_TOKEN_TYPES)
    if types is None:
        return np.zeros([2, checkpoint.width], np.float32)
    return types[[0, min(1, len(types) - 1)]]


def attention_names(index: int) -> list[str]:
    """The query, key and value projections' weight names of encoder layer ``index``."""
    return [f"encoder.layer.{index}.attention.self.{part}" for part in ("query", "key", "value")]


def assign_values(values: list, *, directory: str, owner: str) -> None:
    """Sets each ``(variable, value, source)``; a misshapen value raises ``ValueError``."""
    for variable, value, source in values:
        if tuple(variable.shape) != value.shape:
            raise ValueError(
                f"{directory}: {source} gives shape {value.shape}, but the "
                f"{owner}'s {variable.name} has {tuple(variable.shape)}"
            )
        variable.assign(value.astype(variable.dtype.as_numpy_dtype))
