"""Our models and optimizer against the released code's, without torch: Adam with
``torch.optim``'s epsilon placement, and the mapping of a released ``state_dict``
onto our models (``reference_equivalence``), checked against the released
forward pass written out in numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from pipelines.benchmarks.reference.reference_equivalence import released_weights  # noqa: E402
from tests.conftest import identity_manifest  # noqa: E402
from tfr_rankformer.inputs.manifest import Manifest  # noqa: E402
from tfr_rankformer.model.model_config import ModelConfig  # noqa: E402
from tfr_rankformer.model.models import ranker_of  # noqa: E402
from tfr_rankformer.training.optimizers import (  # noqa: E402
    PyTorchAdam,
    PyTorchAdamW,
    build_optimizer,  # noqa: E402
)
from tfr_rankformer.training.train_config import TrainConfig  # noqa: E402
from tfr_rankformer.training.training_setup import build_run_model  # noqa: E402


def _torch_adamw(params, grads, *, lr, weight_decay, eps=1e-8, b1=0.9, b2=0.999):
    """``torch.optim.AdamW``'s update as its documentation writes it, in float64."""
    params = [np.array(p, np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, step_grads in enumerate(grads, 1):
        for i, g in enumerate(step_grads):
            params[i] *= 1 - lr * weight_decay
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat, v_hat = m[i] / (1 - b1**t), v[i] / (1 - b2**t)
            params[i] -= lr * m_hat / (np.sqrt(v_hat) + eps)
    return params


def _steps(optimizer, start, grads):
    variables = [tf.Variable(np.array(p, np.float32)) for p in start]
    for step_grads in grads:
        optimizer.apply_gradients(
            [(tf.constant(g, tf.float32), var) for g, var in zip(step_grads, variables)]
        )
    return [var.numpy() for var in variables]


def _gradients(steps=5):
    """Gradients from 1e-9 (near epsilon, where the placements part) to 1."""
    rng = np.random.default_rng(0)
    scale = np.array([1e-9, 1e-8, 1e-6, 1e-3, 1.0])
    return [[rng.normal(size=5) * scale, rng.normal(size=(2, 3))] for _ in range(steps)]


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_steps_as_torch_optim(weight_decay):
    start = [np.linspace(-1, 1, 5), np.ones((2, 3))]
    grads = _gradients()
    expected = _torch_adamw(start, grads, lr=1e-3, weight_decay=weight_decay)
    if weight_decay:
        optimizer = PyTorchAdamW(learning_rate=1e-3, weight_decay=weight_decay, epsilon=1e-8)
        keras = tf.keras.optimizers.AdamW(
            learning_rate=1e-3, weight_decay=weight_decay, epsilon=1e-8
        )
    else:
        optimizer = PyTorchAdam(learning_rate=1e-3, epsilon=1e-8)
        keras = tf.keras.optimizers.Adam(learning_rate=1e-3, epsilon=1e-8)
    for found, want in zip(_steps(optimizer, start, grads), expected):
        np.testing.assert_allclose(found, want, rtol=0, atol=1e-6)  # float32 steps of 1e-3
    # Keras's placement moves the weight with gradients near 1e-9 much less.
    decayed = start[0][0] * (1 - 1e-3 * weight_decay) ** len(grads)
    keras_moved = abs(_steps(keras, start, grads)[0][0] - decayed)
    torch_moved = abs(expected[0][0] - decayed)
    assert keras_moved < 0.5 * torch_moved, (keras_moved, torch_moved)


def test_a_sparse_gradient_steps_as_the_dense_one():
    start = np.arange(12, dtype=np.float32).reshape(4, 3)
    rows = tf.constant([[0.5, -1.0, 2.0], [1e-9, 0.0, 3.0]])
    sparse = tf.IndexedSlices(rows, tf.constant([1, 3]), tf.constant([4, 3]))
    dense = tf.convert_to_tensor(sparse)
    results = []
    for gradient in (sparse, dense):
        variable = tf.Variable(start)
        optimizer = PyTorchAdamW(learning_rate=1e-2, weight_decay=0.1, epsilon=1e-8)
        for _ in range(3):
            optimizer.apply_gradients([(gradient, variable)])
        results.append(variable.numpy())
    np.testing.assert_array_equal(results[0], results[1])


def _config(**overrides):
    return TrainConfig(data="d", model_dir="m", **overrides)


def test_the_epsilon_placement_is_a_setting():
    assert _config().adam_epsilon == "pytorch"
    assert isinstance(build_optimizer(_config(), 10), PyTorchAdamW)
    allrank = build_optimizer(_config(model="context_aware"), 10)
    assert isinstance(allrank, PyTorchAdam)
    keras = build_optimizer(_config(adam_epsilon="keras"), 10)
    assert type(keras) is tf.keras.optimizers.AdamW
    with pytest.raises(ValueError, match="adam_epsilon"):
        _config(adam_epsilon="jax")


def test_the_optimizer_round_trips_through_its_config():
    optimizer = build_optimizer(_config(), steps_per_epoch=3)
    again = tf.keras.optimizers.deserialize(tf.keras.optimizers.serialize(optimizer))
    assert type(again) is PyTorchAdamW
    assert again.get_config()["weight_decay"] == pytest.approx(0.1)


# --- the released model's state_dict on our models ----------------------------------


def _layer_norm(x, weight, bias):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * weight + bias


def _gelu(x):
    return x * 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _relu(x):
    return np.maximum(x, 0.0)


def _linear(state, prefix, x):
    return x @ state[f"{prefix}.weight"].T + state[f"{prefix}.bias"]


def _released_forward(name, state, x, mask):
    """The released models' forward pass without dropout (``model.py``: a
    ``norm_first`` ``TransformerEncoder`` of one head, heads ``Linear, ReLU,
    Linear``), on a padded batch: ``(scores [B, L], list logits [B, K] or None)``."""
    if name == "mlp":
        h = x
        for i in (0, 3, 6):
            h = _relu(_linear(state, f"net.{i}", h))
        return _linear(state, "net.9", h)[..., 0], None
    if name == "rankformer":
        cls = np.broadcast_to(state["list_emb.weight"][0], (x.shape[0], 1, x.shape[2]))
        x = np.concatenate([cls, x], axis=1)
        mask = np.concatenate([np.ones((x.shape[0], 1), bool), mask], axis=1)
    d = x.shape[-1]
    layers = sorted({int(k.split(".")[2]) for k in state if k.startswith("transformer.layers.")})
    for i in layers:
        p = f"transformer.layers.{i}"
        h = _layer_norm(x, state[f"{p}.norm1.weight"], state[f"{p}.norm1.bias"])
        qkv = h @ state[f"{p}.self_attn.in_proj_weight"].T + state[f"{p}.self_attn.in_proj_bias"]
        q, k, v = np.split(qkv, 3, axis=-1)
        logits = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        logits = np.where(mask[:, None, :], logits, -np.inf)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        x = x + _linear(state, f"{p}.self_attn.out_proj", weights @ v)
        h = _layer_norm(x, state[f"{p}.norm2.weight"], state[f"{p}.norm2.bias"])
        x = x + _linear(state, f"{p}.linear2", _gelu(_linear(state, f"{p}.linear1", h)))
    list_logits = None
    if name == "rankformer":
        z_cls, x = x[:, 0], x[:, 1:]
        x = np.concatenate([x, np.broadcast_to(z_cls[:, None], x.shape)], axis=-1)
        hidden = _relu(_linear(state, "list_score_net.net.0", z_cls))
        list_logits = _linear(state, "list_score_net.net.3", hidden)
    hidden = _relu(_linear(state, "rank_score_net.net.0", x))
    return _linear(state, "rank_score_net.net.3", hidden)[..., 0], list_logits


def _released_state(name, d, *, layers=2, ff=8, hidden=4, levels=2):
    """A released model's ``state_dict`` shapes, filled with random values."""
    rng = np.random.default_rng(1)
    shapes = {}
    if name == "mlp":
        widths = [d, 512, 256, 128, 1]
        for i, (a, b) in enumerate(zip(widths, widths[1:])):
            shapes[f"net.{3 * i}.weight"], shapes[f"net.{3 * i}.bias"] = (b, a), (b,)
    else:
        for i in range(layers):
            p = f"transformer.layers.{i}"
            shapes[f"{p}.self_attn.in_proj_weight"] = (3 * d, d)
            shapes[f"{p}.self_attn.in_proj_bias"] = (3 * d,)
            shapes[f"{p}.self_attn.out_proj.weight"] = (d, d)
            shapes[f"{p}.self_attn.out_proj.bias"] = (d,)
            shapes[f"{p}.linear1.weight"], shapes[f"{p}.linear1.bias"] = (ff, d), (ff,)
            shapes[f"{p}.linear2.weight"], shapes[f"{p}.linear2.bias"] = (d, ff), (d,)
            for norm in ("norm1", "norm2"):
                shapes[f"{p}.{norm}.weight"] = shapes[f"{p}.{norm}.bias"] = (d,)
        width = 2 * d if name == "rankformer" else d
        shapes["rank_score_net.net.0.weight"] = (hidden, width)
        shapes["rank_score_net.net.0.bias"] = (hidden,)
        shapes["rank_score_net.net.3.weight"], shapes["rank_score_net.net.3.bias"] = (
            (1, hidden),
            (1,),
        )
        if name == "rankformer":
            shapes["list_emb.weight"] = (1, d)
            shapes["list_score_net.net.0.weight"] = (hidden, d)
            shapes["list_score_net.net.0.bias"] = (hidden,)
            shapes["list_score_net.net.3.weight"] = (levels, hidden)
            shapes["list_score_net.net.3.bias"] = (levels,)
    return {k: rng.normal(scale=0.5, size=s).astype(np.float32) for k, s in shapes.items()}


@pytest.mark.parametrize("name", ["rankformer", "transformer", "mlp"])
def test_a_released_state_dict_on_our_model_computes_the_released_function(name):
    d = 6
    architecture = ModelConfig(dropout=0.0)
    if name != "mlp":
        architecture = ModelConfig(num_layers=2, num_heads=1, ff_dim=8, dropout=0.0, head_hidden=4)
    config = _config(model=name, architecture=architecture)
    manifest = Manifest.coerce({**identity_manifest(d), "max_relevance": 2})
    model = build_run_model(config, manifest)
    ranker = ranker_of(model)
    state = _released_state(name, d)
    for variable, value in zip(ranker.trainable_weights, released_weights(name, state, d)):
        assert tuple(variable.shape) == value.shape, variable.name
        variable.assign(value)
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 5, d)).astype(np.float32)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], bool)
    found = ranker({"features": x, "mask": mask}, training=False)
    scores, list_logits = _released_forward(name, state, x.astype(np.float64), mask)
    np.testing.assert_allclose(found["scores"].numpy()[mask], scores[mask], rtol=1e-4, atol=1e-4)
    if name == "rankformer":
        np.testing.assert_allclose(found["list_quality"].numpy(), list_logits, atol=1e-4)
    else:
        assert "list_quality" not in found
