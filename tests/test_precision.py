"""Training precision: float32, bf16 and float16 (mixed), its alias --mixed-precision,
the float32 outputs and losses, the policy restored after a run, float32 exports."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import identity_manifest, train_config
from tfr_rankformer.training.precision import (
    check_precision,
    cpu_precision_warning,
    native_bf16_cpu,
    precision_policy,
    resolve_precision,
)
from tfr_rankformer.training.train_config import TrainConfig


def compute_dtypes(model) -> set[str]:
    """The floating-point compute dtypes of ``model``'s layers (inputs may be bool)."""
    dtypes = {layer.compute_dtype for layer in model.submodules if hasattr(layer, "compute_dtype")}
    return {d for d in dtypes if d and tf.as_dtype(d).is_floating}


TINY = {"num_layers": 1, "num_heads": 1, "ff_dim": 8, "head_hidden": 4, "dropout": 0.0}


@pytest.mark.parametrize(
    "precision, mixed, gpu, expected",
    [
        (None, None, False, "float32"),
        (None, None, True, "float16"),
        (None, True, False, "float16"),
        (None, False, True, "float32"),
        ("bf16", None, True, "bf16"),
        ("float16", True, False, "float16"),
        ("float32", False, True, "float32"),
    ],
)
def test_precision_resolves_from_the_flag_its_alias_and_the_device(precision, mixed, gpu, expected):
    assert resolve_precision(precision, mixed, gpu=gpu) == expected


@pytest.mark.parametrize("precision, mixed", [("bf16", True), ("bf16", False), ("float16", False)])
def test_a_contradicting_alias_is_refused(precision, mixed):
    with pytest.raises(ValueError, match="`mixed_precision`.*`precision`"):
        check_precision(precision, mixed)
    with pytest.raises(ValueError, match="contradicts"):
        TrainConfig(data="d", model_dir="m", precision=precision, mixed_precision=mixed)


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="`precision` must be one of"):
        TrainConfig(data="d", model_dir="m", precision="bfloat16")


@pytest.mark.parametrize(
    "precision, gpu, native, warned",
    [
        ("bf16", False, False, "without bfloat16 instructions"),
        ("bf16", False, None, None),  # the CPU's flags could not be read: no guess
        ("bf16", False, True, None),
        ("float16", False, True, "float16 on a CPU"),
        ("float16", True, None, None),
        ("bf16", True, False, None),
        ("float32", False, False, None),
    ],
)
def test_a_precision_that_runs_slowly_on_this_cpu_is_warned_of(precision, gpu, native, warned):
    warning = cpu_precision_warning(precision, gpu=gpu, native_bf16=native)
    if warned is None:
        assert warning is None
    else:
        assert warned in warning


def test_precision_round_trips_through_config_json():
    config = TrainConfig(data="d", model_dir="m", precision="bf16")
    again = TrainConfig.from_json(config.to_json())
    assert again == config and again.precision == "bf16" and again.mixed_precision is None


def test_cli_refuses_both_flags_naming_them(capsys):
    from pipelines.train_cli import main

    flags = ["--data", "d", "--model-dir", "m", "--precision", "bf16", "--mixed-precision", "on"]
    with pytest.raises(SystemExit) as stop:
        main(flags)
    assert stop.value.code == 2
    message = capsys.readouterr().err
    assert "--mixed-precision on" in message and "--precision bf16" in message


def test_native_bf16_reads_the_cpu_flags(tmp_path):
    with_bf16 = tmp_path / "with"
    with_bf16.write_text("flags\t\t: fpu avx512f avx512_bf16\n")
    without = tmp_path / "without"
    without.write_text("flags\t\t: fpu avx2\n")
    assert native_bf16_cpu(str(with_bf16)) is True
    assert native_bf16_cpu(str(without)) is False
    assert native_bf16_cpu(str(tmp_path / "absent")) is None


def _tiny_compiled(precision: str):
    from tfr_rankformer.inputs.manifest import Manifest
    from tfr_rankformer.training.training_setup import build_compiled_model

    config = TrainConfig(model="rankformer", data="d", model_dir="m", architecture=TINY)
    manifest = Manifest.coerce(dict(identity_manifest(3), max_relevance=2))
    with precision_policy(precision):
        return config, build_compiled_model(config, manifest, steps_per_epoch=1, xla=False)


def test_bf16_computes_in_bfloat16_with_float32_outputs_losses_and_weights():
    config, (model, ranker) = _tiny_compiled("bf16")
    assert tf.keras.mixed_precision.global_policy().name == "float32"  # restored
    assert compute_dtypes(ranker) == {"bfloat16", "float32"}
    assert model.get_layer("normalization").compute_dtype == "float32"
    assert {v.dtype for v in model.weights} == {tf.float32}
    rng = np.random.default_rng(0)
    inputs = {
        "features": tf.constant(rng.normal(size=(2, 5, 3)), tf.float32),
        "mask": tf.constant([[True] * 5, [True] * 3 + [False] * 2]),
    }
    outputs = ranker(inputs, training=True)
    assert config.uses_list_head and set(outputs) >= {"scores", "list_quality"}
    assert {k: v.dtype for k, v in outputs.items()} == {k: tf.float32 for k in outputs}
    labels = {"scores": tf.constant([[1.0, 0, 2, 0, 1], [0, 1, 0, 0, 0]])}
    labels["list_quality"] = tf.reduce_max(labels["scores"], axis=1, keepdims=True)
    loss = ranker.compute_loss(inputs, labels, outputs)
    assert loss.dtype == tf.float32 and np.isfinite(loss.numpy())
    assert not isinstance(ranker.optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    # The masked scores are a float32 layer: scores 1e-4 apart, equal in bfloat16, stay apart.
    masked = ranker.get_layer("scores")
    assert masked.compute_dtype == "float32"
    close = masked(tf.constant([[[1.0001], [1.0002], [1.0003]]]), tf.constant([[True] * 3]))
    assert len(set(close.numpy()[0].tolist())) == 3


def test_float16_scales_its_loss():
    _, (_, ranker) = _tiny_compiled("float16")
    assert isinstance(ranker.optimizer, tf.keras.mixed_precision.LossScaleOptimizer)


class _ComputeDtypes(tf.keras.callbacks.Callback):
    """Records the compute dtypes of the fitted model's layers."""

    def on_train_begin(self, logs=None):
        self.dtypes = compute_dtypes(self.model)


@pytest.fixture(scope="module")
def bf16_run(dataset, tmp_path_factory):
    from tfr_rankformer import runner

    model_dir = tmp_path_factory.mktemp("bf16")
    seen = _ComputeDtypes()
    config = train_config(dataset, model_dir, epochs=1, precision="bf16")
    metrics = runner.train(config, verbose=0, callbacks=[seen])
    return str(model_dir), metrics, seen.dtypes


def test_a_bf16_run_trains_with_finite_metrics_and_records_its_precision(bf16_run):
    _, metrics, dtypes = bf16_run
    assert "bfloat16" in dtypes
    summary = metrics["training"]
    assert summary["precision"] == "bf16" and summary["mixed_precision"] is True
    for split in ("vali", "test"):
        assert np.isfinite(metrics[split]["ndcg_y@10"])
    assert tf.keras.mixed_precision.global_policy().name == "float32"


def test_a_later_float32_run_in_the_same_process_is_float32(bf16_run, dataset, tmp_path):
    from tfr_rankformer import runner

    seen = _ComputeDtypes()
    config = train_config(dataset, tmp_path / "f32", epochs=1, evaluate_splits=())
    metrics = runner.train(config, verbose=0, callbacks=[seen])
    assert seen.dtypes == {"float32"}
    assert metrics["training"]["precision"] == "float32"
    assert metrics["training"]["mixed_precision"] is False


def test_the_export_of_a_bf16_run_serves_float32_close_to_the_bf16_model(bf16_run):
    from tfr_rankformer.core.run_layout import BEST_WEIGHTS
    from tfr_rankformer.serving.export import export_run
    from tfr_rankformer.serving.serving_requests import SIGNATURE_TENSORS
    from tfr_rankformer.training.training_setup import build_run_model, load_run

    model_dir, _, _ = bf16_run
    config, manifest, reloaded = load_run(model_dir)
    assert compute_dtypes(reloaded) == {"float32"}
    with precision_policy("bf16"):
        trained = build_run_model(config, manifest)
    trained.load_weights(f"{model_dir}/{BEST_WEIGHTS}").expect_partial()
    signature = tf.saved_model.load(export_run(model_dir)).signatures[SIGNATURE_TENSORS]
    specs = signature.structured_input_signature[1]
    assert {spec.dtype for spec in specs.values()} == {tf.float32, tf.bool}
    assert specs["features"].dtype == tf.float32
    rng = np.random.default_rng(1)
    features = tf.constant(rng.uniform(0, 1, size=(4, 7, manifest.num_features)), tf.float32)
    mask = tf.constant(rng.uniform(size=(4, 7)) < 0.8)
    served = signature(features=features, mask=mask)
    assert {v.dtype for v in served.values()} == {tf.float32}
    own = trained({"features": features, "mask": mask}, training=False)["scores"].numpy()
    assert own.dtype == np.float32
    valid = mask.numpy()
    scale = max(1.0, float(np.abs(own[valid]).max()))
    np.testing.assert_allclose(served["scores"].numpy()[valid], own[valid], atol=0.05 * scale)
    float32_scores = reloaded({"features": features, "mask": mask}, training=False)["scores"]
    np.testing.assert_allclose(served["scores"].numpy(), float32_scores.numpy(), rtol=1e-5)


def test_the_compiled_pieces_run_in_bfloat16_close_to_float32():
    from tfr_rankformer.model import compiled_ops
    from tfr_rankformer.model.layers import LayerNorm, uses_compiled_ops

    assert uses_compiled_ops(True, tf.bfloat16) == compiled_ops.enabled()
    assert not uses_compiled_ops(True, tf.float16)
    rng = np.random.default_rng(2)
    h = tf.constant(rng.normal(size=(6, 8)), tf.float32)
    bias = tf.constant(rng.normal(size=(8,)), tf.float32)
    key = tf.constant([3, 4])

    def forward_and_gradient(h, bias):
        with tf.GradientTape() as tape:
            tape.watch([h, bias])
            out = compiled_ops.bias_gelu_dropout(h, bias, key, 0.25)
            total = tf.reduce_sum(tf.cast(out, tf.float32) * tf.range(1.0, 9.0))
        return (out, *tape.gradient(total, [h, bias]))

    exact = forward_and_gradient(h, bias)
    low = forward_and_gradient(tf.cast(h, tf.bfloat16), tf.cast(bias, tf.bfloat16))
    for a, b in zip(exact, low):
        assert b.dtype == tf.bfloat16
        np.testing.assert_allclose(tf.cast(b, tf.float32).numpy(), a.numpy(), rtol=0.03, atol=0.1)
    x = tf.constant(rng.normal(size=(4, 8)) * 3 + 1, tf.float32)
    expected = LayerNorm(epsilon=1e-5)(x, training=True)
    normalized = LayerNorm(epsilon=1e-5, dtype="mixed_bfloat16")(x, training=True)
    assert normalized.dtype == tf.bfloat16
    np.testing.assert_allclose(
        tf.cast(normalized, tf.float32).numpy(), expected.numpy(), rtol=0.02, atol=0.02
    )


@pytest.mark.parametrize("settings", [{"precision": "bf16"}, {"mixed_precision": True}])
def test_the_text_model_refuses_mixed_precision_from_a_config_as_on_the_command_line(settings):
    with pytest.raises(ValueError, match="'listformer' \\(text\\) trains in float32"):
        TrainConfig(data="d", model_dir="m", model="listformer", **settings)
    # float32, said either way, is its own precision.
    TrainConfig(data="d", model_dir="m", model="listformer", precision="float32")
    TrainConfig(data="d", model_dir="m", model="listformer", mixed_precision=False)


def test_a_visible_gpu_makes_float16_the_default_of_the_feature_models_only():
    from tfr_rankformer.core import model_families
    from tfr_rankformer.training import loop

    features = TrainConfig(data="d", model_dir="m", model="rankformer")
    text = TrainConfig(data="d", model_dir="m", model="listformer")
    mixed = {c.model: model_families.family_of(c.model).mixed_precision for c in (features, text)}
    assert loop._precision(features, mixed["rankformer"], gpu=True) == "float16"
    assert loop._precision(text, mixed["listformer"], gpu=True) == "float32"
    assert loop._precision(text, mixed["listformer"], gpu=False) == "float32"
