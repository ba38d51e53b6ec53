"""No import cycles, and every library module imports on its own.

The graph holds every import statement of ``tfr_rankformer``, ``tfrecords_tools``
and ``pipelines``: module-level ones, those inside functions and those under
``TYPE_CHECKING`` alike, since each ties the two modules together whenever it
runs. A module that imports only in the middle of someone else's import (a
cycle broken by luck of order) fails the second check, which imports each
library module first thing in a process of its own.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("tfr_rankformer", "tfrecords_tools", "pipelines")


# === The graph ===


def _modules(root: str, packages: tuple[str, ...]) -> dict[str, str]:
    """Module name -> file of every ``.py`` file under ``packages`` (subpackages too)."""
    found = {}
    for package in packages:
        for folder, _, names in os.walk(os.path.join(root, package)):
            for name in names:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, root)[: -len(".py")].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                found[".".join(parts)] = path
    return found


def _imported(module: str, path: str, known: dict[str, str]) -> set[str]:
    """The modules of ``known`` that any import statement of ``path`` names."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up ``level - 1`` parents
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names.add(base)
            # ``from package import module`` names a submodule.
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return (names & set(known)) - {module}


def import_graph(root: str, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules it imports, of those under ``packages``."""
    known = _modules(root, packages)
    return {module: _imported(module, path, known) for module, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm),
    each sorted; a module that imports itself is not one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycles():
    # The tfrecords_tools package and its ``convert`` formed one; it is fixed alongside.
    found = cycles(import_graph(REPO))
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_scan_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    # The check above must be able to fail: a lazy import closes a cycle too, and
    # so does ``from package import module`` or a relative import.
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from .c import g\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n"
    )
    (package / "d.py").write_text("import pkg.a\n")
    graph = import_graph(str(tmp_path), ("pkg",))
    assert graph["pkg.b"] == {"pkg.c"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    (package / "c.py").write_text("")
    assert cycles(import_graph(str(tmp_path), ("pkg",))) == []


# === Each library module on its own ===

# A parent process loads the third-party libraries once (TensorFlow takes
# seconds), then forks one child per library module; each child imports its
# module first, since the parent holds no module of ours. Two children run at a
# time; a child's error goes to a file named after its module. A forked child
# can inherit a lock some library thread held at the fork and hang on it (seen
# on a heavily loaded machine): a child still importing after CHILD_SECONDS is
# stopped and its module imported again in a new process, not a fork.
_FORKED_IMPORTS = r"""
import importlib, json, os, signal, subprocess, sys, traceback
CHILD_SECONDS = int(os.environ.get("IMPORT_CHILD_SECONDS", "240"))
modules, errors, at_once = json.loads(sys.argv[1]), sys.argv[2], 2
for library in ("numpy", "tensorflow", "tensorflow_ranking", "lightgbm"):
    try:
        importlib.import_module(library)
    except ImportError:
        pass
ours = [m for m in sys.modules if m.split(".")[0] in ("tfr_rankformer", "tfrecords_tools")]
if ours:
    sys.exit(f"the parent must hold none of our modules, holds {ours}")
running, failed = {}, {}
def reap():
    pid, status = os.wait()
    name = running.pop(pid)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
        again = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                               text=True, timeout=600)
        if again.returncode:
            failed[name] = again.stderr[-3000:]
    elif status:
        path = os.path.join(errors, name)
        failed[name] = open(path).read() if os.path.exists(path) else f"status {status}"
for name in modules:
    while len(running) >= at_once:
        reap()
    pid = os.fork()
    if pid == 0:
        signal.alarm(CHILD_SECONDS)  # SIGALRM ends a hung child
        code = 0
        try:
            importlib.import_module(name)
        except BaseException:
            with open(os.path.join(errors, name), "w") as f:
                f.write(traceback.format_exc())
            code = 1
        sys.stdout.flush()
        os._exit(code)
    running[pid] = name
while running:
    reap()
print("FAILED " + json.dumps(failed))
"""


def _library_modules() -> list[str]:
    return sorted(m for m in _modules(REPO, ("tfr_rankformer",)) if m != "tfr_rankformer")


@pytest.fixture(scope="module")
def isolated_imports(tmp_path_factory) -> dict[str, str]:
    """Module -> the traceback of its import in a fresh process, for those that failed."""
    errors = tmp_path_factory.mktemp("import_errors")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-c", _FORKED_IMPORTS, json.dumps(_library_modules()), errors]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("FAILED ")[-1])


def test_every_library_module_imports_first_in_a_fresh_process(isolated_imports):
    assert len(_library_modules()) > 50  # the list is the package's, not empty
    assert not isolated_imports, "\n\n".join(f"{m}:\n{e}" for m, e in isolated_imports.items())


def test_a_module_that_fails_to_import_alone_is_reported(tmp_path):
    # The check above must be able to fail: the child's error comes back by name.
    package = tmp_path / "tfr_rankformer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from tfr_rankformer.b import B\nA = 1\n")
    (package / "b.py").write_text("from tfr_rankformer.a import A\nB = 2\n")
    errors = tmp_path / "errors"
    errors.mkdir()
    modules = json.dumps(["tfr_rankformer.a", "tfr_rankformer.b"])
    command = [sys.executable, "-c", _FORKED_IMPORTS, modules, str(errors)]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.split("FAILED ")[-1])
    assert sorted(failed) == ["tfr_rankformer.a", "tfr_rankformer.b"]
    assert "partially initialized module" in failed["tfr_rankformer.a"]


def test_a_hung_forked_child_is_imported_again_in_a_new_process(tmp_path):
    # Module `a` hangs only where the parent's libraries are loaded (the fork);
    # in a new process it imports, so it is not reported. `b` fails in both.
    package = tmp_path / "tfr_rankformer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "import sys, time\nif 'numpy' in sys.modules:\n"
        "    time.sleep(60)\n    raise RuntimeError('the hung fork was not stopped')\n"
    )
    (package / "b.py").write_text("raise RuntimeError('b fails')\n")
    errors = tmp_path / "errors"
    errors.mkdir()
    modules = json.dumps(["tfr_rankformer.a", "tfr_rankformer.b"])
    command = [sys.executable, "-c", _FORKED_IMPORTS, modules, str(errors)]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "IMPORT_CHILD_SECONDS": "3"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.split("FAILED ")[-1])
    assert sorted(failed) == ["tfr_rankformer.b"] and "b fails" in failed["tfr_rankformer.b"]


# === Names ===


def test_no_two_modules_share_a_name():
    # A module's name says what it holds; two modules with one name make a
    # reader guess which is meant (package __init__ files aside).
    by_name: dict[str, list[str]] = {}
    for module in _modules(REPO, PACKAGES):
        if module not in PACKAGES and not os.path.isdir(os.path.join(REPO, *module.split("."))):
            by_name.setdefault(module.rpartition(".")[2], []).append(module)
    shared = {name: found for name, found in by_name.items() if len(found) > 1}
    assert not shared, shared
