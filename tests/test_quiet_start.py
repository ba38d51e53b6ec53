"""A quiet, quick start: no TensorFlow start-up noise, and ``--help`` without TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipelines import COMMANDS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code: str, *, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )


def test_help_of_every_command_imports_no_tensorflow():
    code = f"""
import sys
for name in {COMMANDS!r}:
    module = __import__(f"pipelines.{{name}}_cli", fromlist=["main"])
    try:
        module.main(["--help"])
    except SystemExit as e:
        assert e.code == 0, name
    heavy = [m for m in ("tensorflow", "tensorflow_ranking", "lightgbm") if m in sys.modules]
    print(name, ",".join(heavy) or "-", file=sys.stderr)
"""
    result = _python(code)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split() for line in result.stderr.splitlines())
    assert lines == {name: "-" for name in COMMANDS}
    assert result.stdout.count("usage: tfr-") == len(COMMANDS)


# Runs a command that imports TensorFlow and fails on a missing run directory,
# then logs a warning through TensorFlow's Python logger.
_EVAL = """
import sys
from pipelines.eval_cli import main
code = main(["--model-dir", "no/such/run"{verbose}])
import tensorflow as tf
tf.get_logger().warning("python-side probe")
print("tensorflow" in sys.modules, code, sys.modules["os"].environ.get("TF_CPP_MIN_LOG_LEVEL"))
"""
_TF_LOG_LINE = ("cuda_dnn.cc", "cuda_fft.cc", "cuda_blas.cc", "cpu_feature_guard", "oneDNN")


@pytest.fixture(scope="module")
def quiet():
    return _python(_EVAL.format(verbose=""))


def test_a_command_starts_without_tensorflow_noise(quiet):
    result = quiet
    assert result.stdout.split() == ["True", "1", "3"]
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("tfr-eval: error: ") for line in lines), lines


def test_verbose_keeps_tensorflow_logging(quiet):
    result = _python(_EVAL.format(verbose=', "--verbose"'))
    assert result.stdout.split() == ["True", "1", "None"]
    assert "python-side probe" in result.stderr
    assert "python-side probe" not in quiet.stderr
    if any(marker in result.stderr for marker in _TF_LOG_LINE):
        assert len(result.stderr.splitlines()) > len(quiet.stderr.splitlines())


def test_an_explicit_log_level_is_respected():
    result = _python(_EVAL.format(verbose=""), env_extra={"TF_CPP_MIN_LOG_LEVEL": "1"})
    assert result.stdout.split()[2] == "1"


def test_command_names_match_the_registries():
    from tfr_rankformer.core import command_names, model_families
    from tfr_rankformer.gbdt.gbdt_config import PRESETS
    from tfr_rankformer.ranking import losses

    # Every neural model the commands offer names a builder that imports.
    for name in model_families.model_names(model_families.NEURAL_KINDS):
        assert callable(model_families.get_model(name).load_builder()), name
    assert sorted(command_names.GBDT_PRESET_NAMES) == sorted(PRESETS)
    assert list(command_names.LOSS_SUMMARIES) == list(losses.SCORE_LOSSES)


def _filtered(chunks: list[bytes]) -> bytes:
    from pipelines.tf_log_level import NativeLogFilter

    read_end, write_end = os.pipe()
    pump = NativeLogFilter(write_end)
    for chunk in chunks:
        pump.feed(chunk)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        return f.read()


def test_the_filter_drops_native_noise_and_passes_everything_else_as_it_comes():
    noise = (
        b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        b"I0000 00:00:1795637083.867552   25290 device_compiler.h:186] Compiled cluster\n"
        b"E0000 00:00:1795637083.9   25290 op_level_cost_estimator.cc:699] Error in "
        b"PredictCost() for the op: op: Softmax\n"
    )
    kept = b"E0000 00:00:1795637083.9   25290 session.cc:1] a real failure\n"
    text = b"tfr-train: error: bad\n"
    assert _filtered([noise + kept + text]) == kept + text
    # Split anywhere, the same; a progress bar's partial line passes at once.
    whole = noise + kept + text
    assert _filtered([whole[i : i + 7] for i in range(0, len(whole), 7)]) == kept + text
    assert _filtered([b"\r 40%|####      | 4/10"]) == b"\r 40%|####      | 4/10"
