"""What both sides of the comparison with the authors' released code run on: the LETOR
folds converted with simulated clicks, and ``reference_runner.py`` under a Python with torch."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile

from pipelines.benchmarks.bench_support import MAX_LABEL, append_line, read_lines
from tfr_rankformer.core.atomic_files import atomic_write

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_runner.py")

SETUP = """\
The authors' released code is not set up. To run it beside ours:
  git clone https://github.com/maartenbuyl/rankformer rankformer-official
  python3.11 -m venv ref-venv && ref-venv/bin/pip install torch pandas scikit-learn
then pass --official-dir rankformer-official --official-python ref-venv/bin/python
(or set RANKFORMER_OFFICIAL_DIR and RANKFORMER_OFFICIAL_PYTHON)."""


def add_source_arguments(p: argparse.ArgumentParser, *, folds: bool = True) -> None:
    """The released code and its Python, and with ``folds`` the LETOR folds."""
    add = p.add_argument
    if folds:
        add("--dataset", default="MQ2008", help="a LETOR folds directory or its name")
        add("--data-dir", help="where --dataset is looked up by name")
    add("--official-dir", help="checkout of the released code (or $RANKFORMER_OFFICIAL_DIR)")
    python = "a Python with torch, pandas and scikit-learn (or $RANKFORMER_OFFICIAL_PYTHON)"
    add("--official-python", help=python)


def official_setup(args) -> tuple[str, str] | None:
    """``(official_dir, python)`` when the released code can run, else ``None`` (it says how)."""
    directory = args.official_dir or os.environ.get("RANKFORMER_OFFICIAL_DIR")
    python = args.official_python or os.environ.get("RANKFORMER_OFFICIAL_PYTHON")
    if directory and os.path.isfile(os.path.join(directory, "model.py")) and python:
        check = [python, "-c", "import torch, pandas, sklearn"]
        done = subprocess.run(check, capture_output=True, text=True)
        if done.returncode == 0:
            return directory, python
        print(f"{python} cannot import torch, pandas and sklearn:\n{done.stderr[-300:]}")
    print(SETUP)
    return None


def run_released(setup: tuple[str, str], options: list[str], failure: str) -> list[str]:
    """The output lines of ``reference_runner.py`` with ``options`` (``RuntimeError``: failed)."""
    directory, python = setup
    command = [python, RUNNER, "--official-dir", directory, *options]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        message = f"{failure}:\n{done.stderr[-2000:]}"
        if done.returncode < 0:  # killed: its stderr says nothing of why
            name = signal.Signals(-done.returncode).name
            message += f"\nthe process was killed by {name}"
            message += " (out of memory?)" if name == "SIGKILL" else ""
        raise RuntimeError(message)
    return done.stdout.splitlines()


def convert_folds(args, folds: list[int], seed: int) -> dict[int, str]:
    """``output/data/FoldN`` of every fold, converted once with purchase label 4."""
    from pipelines.experiment_runner import convert_folds as converted_once
    from tfrecords_tools.click_simulation import ClickConfig
    from tfrecords_tools.convert import ConvertConfig

    settings = dict(input=args.dataset, output=os.path.join(args.output, "data"), seed=seed)
    settings.update(data_dir=args.data_dir, all_folds=True, simulate_clicks=True, overwrite=True)
    clicks = ClickConfig(purchase_label=MAX_LABEL)
    converted = converted_once(ConvertConfig(**settings, clicks=clicks), progress=True)
    missing = sorted(set(folds) - set(converted))
    if missing:
        raise ValueError(f"{args.dataset} has folds {sorted(converted)}, not {missing}")
    return {fold: converted[fold] for fold in folds}


def fold_files(args, fold: int) -> dict[str, str]:
    """``{split: LETOR file}`` of ``fold``, found as ``tfr-convert`` finds it."""
    from tfrecords_tools.sources import resolve_source
    from tfrecords_tools.synthetic import SyntheticConfig

    with tempfile.TemporaryDirectory() as scratch:
        where = dict(data_dir=args.data_dir, scratch=scratch, synthetic=SyntheticConfig())
        source = resolve_source(args.dataset, **where, tfds_download=False)
    return source.folds[fold]


def shared_lists(fold_data: str) -> dict[str, str]:
    """``{split: .npz}`` of the converted fold's train and test lists, written once."""
    import numpy as np

    from tfr_rankformer.inputs.list_arrays import read_split
    from tfr_rankformer.inputs.manifest import load_manifest

    directory = os.path.join(fold_data, "lists")
    paths = {split: os.path.join(directory, f"{split}.npz") for split in ("train", "test")}
    for split, path in paths.items():
        if not os.path.isfile(path):
            arrays = read_split(fold_data, load_manifest(fold_data), split)
            os.makedirs(directory, exist_ok=True)
            with atomic_write(path, "wb") as f:
                fields = ("features", "label", "relevance", "offsets")
                np.savez(f, **{name: getattr(arrays, name) for name in fields})
    return paths


def theirs(setup, fold: int, names: list[str], args, seed: int, files) -> dict[str, dict]:
    """The released code's results on ``fold`` with ``seed`` and ``files`` (cached)."""
    cache = os.path.join(args.output, "official", args.labels, f"seed{seed}", f"Fold{fold}.jsonl")
    found = read_lines(cache) if os.path.isfile(cache) else []
    results = {r["model"]: r for r in found if "model" in r}
    # One process per model: the released RankFormer holds its memory until it exits.
    for name in [n for n in names if n not in results]:
        options = ["--epochs", str(args.epochs), "--train", files["train"], "--test", files["test"]]
        options += ["--seed", str(seed), "--models", name]
        options += ["--threads", str(args.official_threads)]
        failure = f"the released code failed on Fold{fold} (seed {seed}, {name})"
        for line in run_released(setup, options, failure):
            if line.startswith("{") and '"model"' in line:
                os.makedirs(os.path.dirname(cache), exist_ok=True)
                results[name] = json.loads(line)
                append_line(cache, results[name])
    return {n: results[n] for n in names}
