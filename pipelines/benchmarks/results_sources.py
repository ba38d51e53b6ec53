"""The records of docs/records/ and the tables ``docs/results.md`` prints from them.

The benchmarks' own functions make every table: ``reference_parity``'s
(:func:`parity_table`, from the runs :func:`parity_runs` gathers as its
``--recorded-only`` does), ``web30k_scale.report`` (:func:`web30k_table`) and
``rerank_tables.report`` (:func:`cranfield_table`). A speed is printed with the
CPU its record names (:func:`cpu_names`). ``results_tables`` places them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections import Counter
from collections.abc import Iterable

RECORDS = "docs/records"
PARITY = "python -m pipelines.benchmarks.reference.reference_parity"
WEB30K = "python -m pipelines.benchmarks.web30k_scale"
CRANFIELD = "python -m pipelines.benchmarks.cranfield_rerank"
WEB30K_CLICKS = "web30k_clicks_3epochs"
WEB30K_BATCHES = "web30k_clicks"
CRANFIELD_DIR = "cranfield_rerank"
SPEED = "python -m pipelines.benchmarks.speed_records"


@dataclasses.dataclass(frozen=True)
class Parity:
    """A ``reference_parity`` table reprinted from its ``--record`` file: which
    file, epochs, models and seeds (``--seeds``), and which of its tables."""

    record: str
    epochs: int
    models: str = "rankformer,transformer,mlp"
    seeds: str = "1"
    parts: tuple[str, ...] = ("table",)

    def argv(self, record: str) -> list[str]:
        """``reference_parity``'s arguments that reprint the table from ``record``."""
        argv = ["--dataset", "MQ2008", "--folds", "1-5", "--epochs", str(self.epochs)]
        argv += ["--models", self.models] if self.models != Parity.models else []
        argv += ["--seeds", self.seeds] if self.seeds != Parity.seeds else []
        return argv + ["--recorded-only", "--record", record, "--output", "DIR"]

    @property
    def command(self) -> str:
        """The command line that reprints it (run from the repository's root)."""
        return " ".join([PARITY, *self.argv(f"{RECORDS}/{self.record}")])


PARITY_30 = Parity("reference_parity_mq2008_30.jsonl", 30, parts=("table", "folds", "models"))
PARITY_200 = Parity(
    "reference_parity_mq2008_200.jsonl",
    200,
    models="rankformer,transformer",
    seeds="all",
    parts=("table", "folds", "seeds", "noise", "models"),
)
PARITY_200_SEEDS = Parity("reference_parity_mq2008_200.jsonl", 200, seeds="2")
PARITY_200_KERAS = Parity(
    "reference_parity_mq2008_200_keras_epsilon.jsonl",
    200,
    models=",".join(f"{m}:adam_epsilon=keras" for m in ("rankformer", "transformer", "mlp")),
)


# === Reading the records ===


def parity_runs(root: str, parity: Parity) -> tuple[argparse.Namespace, dict, dict]:
    """``(args, results, by_seed)`` of ``reference_parity --recorded-only`` on the
    record (``results[label][side][fold]``: a fold's runs; ``by_seed[label][side]
    [(fold, seed)]``: each run, its record line).

    Raises:
      ValueError: when the record lacks a run the table needs, or a line is no run.
    """
    from pipelines.benchmarks.reference.parity_records import (
        RunRecord,
        recorded_runs,
        seeds_of,
    )
    from pipelines.benchmarks.reference.reference_parity import parse_args
    from pipelines.experiment_specs import parse_folds, parse_models

    argv = parity.argv(os.path.join(root, RECORDS, parity.record))
    args = parse_args(argv)
    record = RunRecord(args.record, args, "")
    seeds = seeds_of(record, args)

    specs, folds = parse_models(args.models), parse_folds(args.folds)
    results, by_seed, left_out = recorded_runs(record, specs, folds, seeds, args.side)
    if left_out:
        side, label, fold, seed = left_out[0]
        raise ValueError(
            f"{parity.record} lacks {len(left_out)} run(s) its table needs, "
            f"e.g. {side} {label} Fold{fold} seed {seed}"
        )
    return args, results, by_seed


def cpu_names(runs: Iterable[dict]) -> str:
    """The CPUs the runs name, each with its count of runs when there are several.

    >>> cpu_names([{"cpu": "A"}, {"cpu": "B"}, {"cpu": "A"}])
    'A (2 runs) and B (1 runs)'
    """
    counted = Counter(run.get("cpu", "unknown CPU") for run in runs)
    if len(counted) == 1:
        return next(iter(counted))
    return " and ".join(f"{cpu} ({n} runs)" for cpu, n in counted.most_common())


def _all_runs(by_seed: dict) -> list[dict]:
    return [run for sides in by_seed.values() for runs in sides.values() for run in runs.values()]


def read_lines(root: str, directory: str, name: str) -> tuple[dict, list[dict]]:
    """A benchmark's record ``docs/records/DIRECTORY/NAME``: its run line and the rest.

    Raises:
      ValueError: when it does not exist.
    """
    from pipelines.benchmarks.run_records import read_records

    run, records = read_records(os.path.join(root, RECORDS, directory, name))
    if run is None:
        raise ValueError(f"no {RECORDS}/{directory}/{name}")
    return run, records


# === The tables of docs/results.md ===


def parity_table(root: str, parity: Parity) -> str:
    """``reference_parity``'s tables of the record (those ``parity.parts`` names), with
    the CPUs its runs name."""
    from pipelines.benchmarks.reference.parity_tables import (
        between_models,
        fold_by_fold,
        over_runs,
        seed_by_seed,
        summarize,
        table,
    )

    args, results, by_seed = parity_runs(root, parity)
    fold_means, rows, paired = summarize(results, args.labels)
    parts = {
        "table": lambda: table(rows, cpu_names(_all_runs(by_seed)), args, paired),
        "folds": lambda: fold_by_fold(paired),
        "seeds": lambda: seed_by_seed(by_seed),
        "noise": lambda: over_runs(by_seed),
        "models": lambda: between_models(fold_means, results),
    }
    text = "".join(parts[part]() for part in parity.parts)
    return f"Reprinted by `{parity.command}`:\n\n{text}"


def web30k_table(root: str, directory: str) -> str:
    """``web30k_scale``'s report of the record in ``directory``, its CPU and command
    first (the record's date is left out)."""
    from pipelines.benchmarks.web30k_scale import report

    run, records = read_lines(root, directory, "web30k_scale.jsonl")
    text = report(run, records)
    tables = text[text.index("| protocol |") :]
    return (
        f"CPU: {run['cpu']}. Measured by `{run['command']}`; "
        f"`{WEB30K} --output {RECORDS}/{directory} --reprint` reprints it:\n\n{tables}"
    )


def cranfield_table(root: str) -> str:
    """``cranfield_rerank``'s report of its record: every fold, the mean ± standard
    error of each column over the folds that have it, and the trainings."""
    from pipelines.benchmarks.rerank_tables import report

    run, records = read_lines(root, CRANFIELD_DIR, "cranfield_rerank.jsonl")
    first, _, tables = report(run, records).partition("\n")
    reprint = f"{CRANFIELD} --output {RECORDS}/{CRANFIELD_DIR} --reprint"
    return f"Measured by {first}; `{reprint}` reprints it:\n\n{tables}"


def speed_table(root: str, name: str) -> str:
    """A speed benchmark's record ``name`` (``train_bench``'s, ``serve_bench``'s or
    ``input_bench``'s), as ``speed_records`` prints it, with the command that
    reprints it; every row names its CPU."""
    from pipelines.benchmarks.run_records import read_lines
    from pipelines.benchmarks.speed_records import record_table

    record = f"{RECORDS}/{name}"
    table = record_table(read_lines(os.path.join(root, record)))
    return f"`{SPEED} {record}` reprints it:\n\n{table}"
