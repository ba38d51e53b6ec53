"""The library stands alone: ``tfr_rankformer`` imports neither the converter nor the programs.

Layers depend one way: ``pipelines`` (programs) -> ``tfrecords_tools``
(conversion) -> ``tfr_rankformer`` (library), and the programs use the library
directly too. These tests keep the library's side of that.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import tfr_rankformer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBRARY = os.path.dirname(tfr_rankformer.__file__)
OUTER_LAYERS = ("tfrecords_tools", "pipelines")


def _imported_names(path: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import statement in a file, nested ones included."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
    return found


def _library_files() -> list[str]:
    """Every ``.py`` file of the library, subpackages included, relative to it."""
    found = []
    for folder, _, names in os.walk(LIBRARY):
        found += [
            os.path.relpath(os.path.join(folder, n), LIBRARY) for n in names if n.endswith(".py")
        ]
    return sorted(found)


def test_library_files_include_subpackages():
    assert "text/listformer.py" in _library_files()


def test_no_library_module_imports_the_converter_or_the_programs():
    offending = []
    for name in _library_files():
        path = os.path.join(LIBRARY, name)
        for line, module in _imported_names(path):
            if module.split(".")[0] in OUTER_LAYERS:
                offending.append(f"tfr_rankformer/{name}:{line} imports {module}")
    assert not offending, "\n".join(offending)


def test_the_scan_sees_nested_imports(tmp_path):
    # The check above must be able to fail: a lazy import inside a function counts.
    path = tmp_path / "module.py"
    path.write_text("def f():\n    from tfrecords_tools.convert import convert\n")
    assert _imported_names(str(path)) == [(2, "tfrecords_tools.convert")]


def test_every_library_module_imports_with_the_outer_layers_unavailable():
    modules = [
        name[: -len(".py")].replace(os.sep, ".")
        for name in _library_files()
        if os.path.basename(name) != "__init__.py"
    ]
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
from tfr_rankformer.model.models import FEATURES, MASK, ModelConfig, build_model
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
