"""The library's packages form layers: a module imports only from its own layer or below.

The order is the one docs/layout.md gives. A new package must be placed in it here,
so the test fails until it is.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

LIBRARY = pathlib.Path(__file__).resolve().parent.parent / "tfr_rankformer"

# Lowest first. Top-level modules (``tfr_rankformer/*.py``) form the facade layer.
LAYERS = (
    "core",
    "inputs",
    "model",
    "ranking",
    "training",
    "serving",
    "gbdt",
    "features",
    "text",
    "distill",
    "<facade>",
    "tuning",
)


def layer_of(module: str) -> str:
    """``tfr_rankformer.training.loop`` -> ``training``; a top-level module -> the facade."""
    parts = module.split(".")
    if len(parts) >= 3 or (len(parts) == 2 and (LIBRARY / parts[1]).is_dir()):
        return parts[1]
    return "<facade>"


def imported_modules(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every ``tfr_rankformer`` module a file imports, at any depth (function bodies too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name) for a in node.names if a.name.startswith("tfr_rankformer.")
            ]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "tfr_rankformer":
                found += [(node.lineno, f"tfr_rankformer.{a.name}") for a in node.names]
            elif node.module.startswith("tfr_rankformer."):
                found.append((node.lineno, node.module))
    return found


def library_files() -> list[pathlib.Path]:
    return sorted(
        p for p in LIBRARY.rglob("*.py") if p.name != "__init__.py" or p.parent != LIBRARY
    )


def upward_imports() -> list[str]:
    problems = []
    for path in library_files():
        rel = path.relative_to(LIBRARY.parent).with_suffix("")
        own = layer_of(".".join(rel.parts))
        for line, module in imported_modules(path):
            if module in ("tfr_rankformer.__version__",):
                continue
            target = layer_of(module)
            if LAYERS.index(target) > LAYERS.index(own):
                problems.append(f"{rel}.py:{line} ({own}) imports {module} ({target})")
    return problems


def test_every_package_has_a_layer():
    packages = {p.name for p in LIBRARY.iterdir() if (p / "__init__.py").exists()}
    assert packages <= set(LAYERS), f"place {sorted(packages - set(LAYERS))} in LAYERS"


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    assert upward_imports() == []


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    # The scan must be able to fail: a core module importing the training loop.
    fake = tmp_path / "tfr_rankformer"
    (fake / "core").mkdir(parents=True)
    (fake / "training").mkdir()
    (fake / "core" / "names.py").write_text(
        "def f():\n    from tfr_rankformer.training import loop\n"
    )
    (fake / "training" / "loop.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "LIBRARY", fake)
    assert upward_imports() == [
        "tfr_rankformer/core/names.py:2 (core) imports tfr_rankformer.training (training)"
    ]


@pytest.mark.parametrize(
    "module, layer",
    [
        ("tfr_rankformer.core.config_io", "core"),
        ("tfr_rankformer.runner", "<facade>"),
        ("tfr_rankformer.training", "training"),
    ],
)
def test_layer_of(module, layer):
    assert layer_of(module) == layer
