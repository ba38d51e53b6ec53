"""``reference_parity``'s inputs: the LETOR folds, their conversion, and the released code.

What both sides run on and where: the ``--dataset``/``--official-dir`` options
(:func:`add_source_arguments`), whether the authors' released code and a Python
with torch are set up (:func:`official_setup`, else ``SETUP`` says how), the
folds converted once with simulated clicks (:func:`convert_folds`), a fold's
LETOR files (:func:`fold_files`) or its converted lists as ``.npz``
(:func:`shared_lists`) for the released code, its runs on a fold
(:func:`theirs`, through ``reference_runner.py``). ``reference_parity`` uses
them all, and other benchmarks import them from it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile

from pipelines.benchmarks.bench_support import MAX_LABEL, letor_folds
from pipelines.flag_table import add_flag

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_runner.py")

SETUP = """\
The authors' released code is not set up, so only our side runs. To compare:
  git clone https://github.com/maartenbuyl/rankformer rankformer-official
  python3.11 -m venv ref-venv && ref-venv/bin/pip install torch pandas scikit-learn
then pass --official-dir rankformer-official --official-python ref-venv/bin/python
(or set RANKFORMER_OFFICIAL_DIR and RANKFORMER_OFFICIAL_PYTHON)."""


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """``--dataset``/``--data-dir`` (the LETOR folds) and ``--official-dir``/
    ``--official-python`` (the released code and a Python that runs it)."""
    add_flag(p, "dataset", default="MQ2008", help="a LETOR folds directory or its name")
    add_flag(p, "data_dir", help="where --dataset is looked up by name")
    add_flag(p, "official_dir", help="checkout of github.com/maartenbuyl/rankformer")
    add_flag(p, "official_python", help="a Python with torch, pandas and scikit-learn")


def official_setup(args) -> tuple[str, str] | None:
    """``(official_dir, python)`` when the released code can run, else ``None``."""
    directory = args.official_dir or os.environ.get("RANKFORMER_OFFICIAL_DIR")
    python = args.official_python or os.environ.get("RANKFORMER_OFFICIAL_PYTHON")
    if not directory or not os.path.isfile(os.path.join(directory, "model.py")) or not python:
        return None
    check = subprocess.run(
        [python, "-c", "import torch, pandas, sklearn"], capture_output=True, text=True
    )
    if check.returncode != 0:
        print(f"{python} cannot import torch, pandas and sklearn:\n{check.stderr[-300:]}")
        return None
    return directory, python


def convert_folds(args, folds: list[int], seed: int) -> dict[int, str]:
    """``output/data/FoldN`` for every fold, converted once with purchase label 4, its
    clicks simulated with ``seed``."""
    from tfrecords_tools.click_simulation import ClickConfig

    converted = letor_folds(
        args.dataset,
        args.output,
        data_dir=args.data_dir,
        seed=seed,
        clicks=ClickConfig(purchase_label=MAX_LABEL),
    )
    missing = sorted(set(folds) - set(converted))
    if missing:
        raise ValueError(f"{args.dataset} has folds {sorted(converted)}, not {missing}")
    return {fold: converted[fold] for fold in folds}


def fold_files(args, fold: int) -> dict[str, str]:
    """``{split: LETOR file}`` of ``fold``, found as ``tfr-convert`` finds it."""
    from tfrecords_tools.sources import resolve_source
    from tfrecords_tools.synthetic import SyntheticConfig

    with tempfile.TemporaryDirectory() as scratch:
        source = resolve_source(
            args.dataset,
            data_dir=args.data_dir,
            scratch=scratch,
            synthetic=SyntheticConfig(),
            tfds_download=False,
        )
    return source.folds[fold]


def shared_lists(fold_data: str) -> dict[str, str]:
    """``{split: .npz}`` of the converted fold's train and test lists, as the
    runner reads them (written once, next to the fold's TFRecords)."""
    import numpy as np

    from tfr_rankformer.inputs.data import load_manifest
    from tfr_rankformer.inputs.list_arrays import read_split

    directory = os.path.join(fold_data, "lists")
    paths = {split: os.path.join(directory, f"{split}.npz") for split in ("train", "test")}
    manifest = load_manifest(fold_data)
    for split, path in paths.items():
        if os.path.isfile(path):
            continue
        arrays = read_split(fold_data, manifest, split)
        os.makedirs(directory, exist_ok=True)
        partial = path + ".partial.npz"
        np.savez(
            partial,
            features=arrays.features,
            label=arrays.label,
            relevance=arrays.relevance,
            offsets=arrays.offsets,
        )
        os.replace(partial, path)
    return paths


def theirs(setup, fold: int, names: list[str], args, seed: int, files) -> dict[str, dict]:
    """The released code's results on ``fold`` with ``seed`` (run once, then read from
    the cache); ``files`` are its train and test inputs, LETOR or ``.npz`` lists."""
    cache = os.path.join(args.output, "official", args.labels, f"seed{seed}", f"Fold{fold}.jsonl")
    results = {}
    if os.path.isfile(cache):
        with open(cache, encoding="utf-8") as f:
            results = {r["model"]: r for r in map(json.loads, f) if "model" in r}
    directory, python = setup
    # One process per model: the released RankFormer's backward pass allocates a
    # gradient the size of the whole padded batch for each of its lists (2,048 x
    # 6.4 MB on MQ2008, some 13 GB), and a process keeps that memory until it
    # exits, which would starve the models after it or a second run beside it.
    for name in [n for n in names if n not in results]:
        command = [python, RUNNER, "--official-dir", directory, "--epochs", str(args.epochs)]
        command += ["--train", files["train"], "--test", files["test"]]
        command += ["--seed", str(seed), "--models", name]
        command += ["--threads", str(args.official_threads)]
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
            with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True) as run:
                for line in run.stdout:
                    if line.startswith("{") and '"model"' in line:
                        record = json.loads(line)
                        with open(cache, "a", encoding="utf-8") as f:
                            f.write(line.rstrip("\n") + "\n")
                        results[record["model"]] = record
            if run.returncode != 0:
                errors.seek(0)
                message = errors.read()[-2000:]
                if run.returncode < 0:  # killed: its stderr says nothing of why
                    signal_name = signal.Signals(-run.returncode).name
                    hint = " (out of memory?)" if signal_name == "SIGKILL" else ""
                    message += f"\nthe process was killed by {signal_name}{hint}"
                raise RuntimeError(
                    f"the released code failed on Fold{fold} (seed {seed}, {name}):\n{message}"
                )
    return {n: results[n] for n in names}
