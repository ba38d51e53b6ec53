"""The programs under ``pipelines/`` use each other's public names only, and the
benchmarks keep one copy of each helper.

Read with ``ast``, nothing imported: a module fails that imports ``_name`` from
another (``from x import _name``) or reads ``module._name`` of a module it
imported, in its own code or in the code it hands a child process; so do two
benchmark modules that define a function of the same name with the same body
(docstrings aside).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = ROOT / "pipelines"
BENCHMARKS = PIPELINES / "benchmarks"


def _modules(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(tree: ast.AST) -> list[str]:
    """``from x import _y``, and ``module._y`` where an import binds ``module`` to a
    module of this repository, in ``tree``."""
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_ours(alias.name):
                    modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
                elif _is_module(node, alias.name):
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _private(node.attr)
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def _is_ours(module: str) -> bool:
    """Whether ``module`` is a package or module of this repository (the standard
    library's and other projects' private names are theirs to keep)."""
    path = ROOT.joinpath(*module.split("."))
    return (path / "__init__.py").is_file() or path.with_suffix(".py").is_file()


def _is_module(node: ast.ImportFrom, name: str) -> bool:
    """Whether ``from node.module import name`` names a module of this repository."""
    return bool(node.module) and not node.level and _is_ours(f"{node.module}.{name}")


def function_bodies(tree: ast.AST) -> dict[tuple[str, str], int]:
    """``(name, dump of its body without the docstring)`` -> line, of every function."""
    bodies = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if ast.get_docstring(node) is not None:
                body = body[1:]
            bodies[(node.name, ast.dump(ast.Module(body=body, type_ignores=[])))] = node.lineno
    return bodies


def embedded_code(tree: ast.AST) -> list[ast.AST]:
    """The Python programs held in string constants of ``tree`` (a child process's code)."""
    programs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "import" in node.value:
                try:
                    programs.append(ast.parse(node.value))
                except SyntaxError:
                    continue  # prose, not a program
    return programs


@pytest.mark.parametrize("path", _modules(PIPELINES), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_another_modules_private_names(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [f for code in [tree, *embedded_code(tree)] for f in private_imports(code)]
    assert not found, f"{path.relative_to(ROOT)} uses private names: {found}"


def test_no_two_benchmark_modules_define_the_same_function():
    seen, repeated = {}, []
    for path in _modules(BENCHMARKS):
        where = path.relative_to(ROOT)
        for key, line in function_bodies(ast.parse(path.read_text(encoding="utf-8"))).items():
            if key in seen and seen[key][0] != where:
                repeated.append(f"{key[0]}: {seen[key][0]}:{seen[key][1]} and {where}:{line}")
            seen.setdefault(key, (where, line))
    assert not repeated, "functions defined twice:\n" + "\n".join(repeated)


def test_the_checks_catch_what_they_look_for():
    source = (
        "import pipelines.benchmarks.bench_support as support\n"
        "from pipelines.benchmarks import memory_sweep\n"
        "from pipelines.benchmarks.train_bench import _hidden\n"
        "import argparse\n"
        "support._secret()\nmemory_sweep._cell(1)\nsupport.__doc__\nargparse._ArgumentGroup\n"
    )
    found = private_imports(ast.parse(source))
    assert [f.split(": ")[1] for f in found] == [
        "from pipelines.benchmarks.train_bench import _hidden",
        "support._secret",
        "memory_sweep._cell",
    ]
    one = function_bodies(ast.parse('def f(x):\n    """One."""\n    return x + 1\n'))
    two = function_bodies(ast.parse('def f(x):\n    """Two."""\n    return x + 1\n'))
    other = function_bodies(ast.parse("def f(x):\n    return x + 2\n"))
    assert set(one) == set(two) and not set(one) & set(other)
    child = ast.parse('CODE = """\nfrom pipelines.benchmarks.train_bench import _hidden\n"""\n')
    assert [private_imports(code) for code in embedded_code(child)] == [
        ["line 2: from pipelines.benchmarks.train_bench import _hidden"]
    ]
