"""The library stands alone: every module imports, and a user's own tf.data pipeline
trains with its model and loss, while the converter and the programs cannot be imported.
(The layers themselves are import-linter contracts in pyproject.toml.)"""

from __future__ import annotations

import os
import subprocess
import sys

import tfr_rankformer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = os.path.dirname(tfr_rankformer.__file__)
OUTER_LAYERS = ("tfrecords_tools", "pipelines")


def _library_modules() -> list[str]:
    found = []
    for folder, _, names in os.walk(LIBRARY):
        rel = os.path.relpath(folder, LIBRARY)
        for name in names:
            if name.endswith(".py") and name != "__init__.py":
                parts = [] if rel == "." else rel.split(os.sep)
                found.append(".".join([*parts, name[: -len(".py")]]))
    return sorted(found)


def test_every_library_module_imports_with_the_outer_layers_unavailable():
    modules = _library_modules()
    code = f"""
import sys
for layer in {OUTER_LAYERS!r}:
    sys.modules[layer] = None  # any import of it now raises ImportError
import importlib
for name in {modules!r}:
    importlib.import_module("tfr_rankformer." + name)
# A user's own tf.data pipeline: build, compile with the library's loss, fit.
import numpy as np
import tensorflow as tf
from tfr_rankformer.ranking.losses import get_score_loss
from tfr_rankformer.core.elwc_schema import FEATURES, MASK
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.model.models import build_model
manifest = {{"num_features": 3, "normalization": {{"method": "standard",
            "standard": {{"mean": [0.0] * 3, "std": [1.0] * 3}}}}}}
model = build_model("rankformer", manifest, ModelConfig(), None)
loss = get_score_loss("softmax")
model.compile(optimizer="adam", loss={{loss.output: loss.build(2)}})
rng = np.random.default_rng(0)
x = {{FEATURES: rng.normal(size=(8, 5, 3)).astype("float32"), MASK: np.ones((8, 5), bool)}}
y = {{loss.output: rng.integers(0, 3, size=(8, 5)).astype("float32")}}
history = model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4), epochs=1, verbose=0)
assert np.isfinite(history.history["loss"][0])
print("imported", len({modules!r}))
"""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"imported {len(modules)}" in result.stdout
