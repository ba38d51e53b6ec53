"""``web30k_scale``'s last stage: the authors' released RankFormer on the clicks data's lists.

It runs ``reference_runner.py`` (see ``reference_parity``) on the very lists
our clicks run trained on, once per ``--official-batch-sizes`` entry, for
``--click-epochs`` epochs like ours, with a time limit. Its lists/s is the
median of its epochs' rates. Its 2048 lists per batch need about 34 GiB with
WEB30K's 136 features (its backward pass holds a gradient the size of the
padded batch per list), and its lists/s falls as the batch grows, so smaller
batches favour it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable

from pipelines.benchmarks.bench_support import run_stage
from pipelines.benchmarks.reference.parity_sources import RUNNER, add_source_arguments, shared_lists
from pipelines.flag_table import add_flag
from tfr_rankformer.inputs.manifest import Manifest

__all__ = [
    "RELEASED_BATCH",
    "add_released_options",
    "released",
    "released_batches",
    "released_estimate",
]

RELEASED_BATCH = 2_048  # the released code's lists per batch


def released_estimate(manifest: Manifest, batch: int) -> int:
    """Bytes the released RankFormer's training holds at ``batch`` lists: its backward
    pass holds a gradient the size of the whole padded batch per list."""
    longest = manifest.split("train").longest_list
    return batch * batch * longest * manifest.num_features * 4


def released_batches(text: str, manifest: Manifest) -> list[int]:
    """``--official-batch-sizes``: the sizes listed, or for ``auto`` the released 2048
    halved until :func:`released_estimate` fits in half of this machine's memory."""
    if text != "auto":
        return [int(x) for x in text.split(",") if x]
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    batch = RELEASED_BATCH
    while batch > 1 and released_estimate(manifest, batch) > memory / 2:
        batch //= 2
    return [batch]


def released(
    args, setup, ours: dict, data: str, manifest: Manifest | None, log: Callable[[str], str]
) -> list[dict]:
    """Records of the released rankformer's runs on the clicks ``data`` (described by
    ``manifest``), once per ``--official-batch-sizes`` entry; ``log(stage)`` names
    each run's log file."""
    record = {"protocol": "clicks", "stage": "released", "model": "rankformer"}
    if setup is None:
        print("released code: not set up (--official-dir, --official-python: see reference_parity)")
        return [{**record, "failure": "not set up"}]
    if manifest is None or ours.get("failure"):
        return [{**record, "failure": "no clicks data or no rankformer run of ours"}]
    paths, (directory, python) = shared_lists(data), setup
    records = []
    for batch in released_batches(args.official_batch_sizes, manifest):
        batch = min(batch, manifest.split("train").num_lists)
        stage = f"released-b{batch}"
        estimate = released_estimate(manifest, batch)
        command = [python, RUNNER, "--official-dir", directory, "--train", paths["train"]]
        command += ["--test", paths["test"], "--epochs", str(args.click_epochs)]
        command += ["--models", "rankformer", "--threads", str(args.official_threads)]
        command += ["--batch-size", str(batch)]
        result = {**record, "stage": stage, "batch_size": batch, "estimated_peak_bytes": estimate}
        result.update(run_stage(command, log(stage), timeout=args.official_timeout))
        with open(log(stage), encoding="utf-8", errors="replace") as f:
            lines = [json.loads(x) for x in f if x.startswith("{")]
        results = [x for x in lines if "model" in x]
        # Reading the files, the quantile transform and the click simulation,
        # before its first epoch and outside its lists/s.
        loads = [x["load_seconds"] for x in lines if "load_seconds" in x]
        if loads:
            result["load_seconds"] = loads[0]
        if results:
            result["lists_per_sec"] = results[-1].get("lists_per_sec")  # the median epoch's
            result["train_seconds"] = results[-1].get("train_seconds")
        records.append(result)
    return records


def add_released_options(p: argparse.ArgumentParser) -> None:
    """The ``released code`` group: where it is, its time limit, threads and batches."""
    group = p.add_argument_group("released code (--dataset, --data-dir: not used here)")
    add_source_arguments(group)
    group.add_argument("--official-timeout", type=float, default=1800.0, help="Default: 1800 s")
    add_flag(group, "official_threads", help="its threads. Default: 2")
    group.add_argument(
        "--official-batch-sizes",
        default="auto",
        help="lists per batch of the released code, comma-separated: one run each. Default: "
        "auto, its 2048 halved until its estimated memory fits in half of this machine's",
    )
