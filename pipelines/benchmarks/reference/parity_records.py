"""``reference_parity``'s ``--record``: finished runs, one a JSON line, so that a benchmark is
finished in parts or elsewhere and its tables printed from the record alone."""

from __future__ import annotations

import os
from collections.abc import Callable

from pipelines.benchmarks.bench_support import append_line, read_lines

METRICS = ("ndcg_y@10", "ndcg_r@10", "ndcg_y@10_tmax")
RELEASED = "released code"  # the side's name in the tables and parity.json
FOLD_SEED_STRIDE = 1000  # with --fold-seeds, seed s on fold f is 1000 f + s


def run_seeds(first: int, count: int, fold: int, per_fold: bool) -> list[int]:
    """A fold's seeds on both sides; ``per_fold`` adds ``1000 * fold`` (no two folds share
    initial weights).

    >>> run_seeds(2, 3, 5, per_fold=False), run_seeds(2, 3, 5, per_fold=True)
    ([2, 3, 4], [5002, 5003, 5004])
    """
    offset = FOLD_SEED_STRIDE * fold if per_fold else 0
    return [offset + seed for seed in range(first, first + count)]


class RunRecord:
    """The runs of ``path`` by ``IDENTITY``; new runs are appended as they finish."""

    IDENTITY = ("dataset", "labels", "data_seed", "epochs", "side", "model", "fold", "seed")

    def __init__(self, path: str | None, args, cpu: str):
        self.path, self.cpu = path, cpu
        dataset = os.path.basename(os.path.normpath(args.dataset))
        self.settings = dict(
            dataset=dataset, labels=args.labels, data_seed=args.data_seed, epochs=args.epochs
        )
        self.runs: dict[tuple, dict] = {}
        for number, run in enumerate(read_lines(path) if path and os.path.isfile(path) else [], 1):
            try:
                self.runs[tuple(run[k] for k in self.IDENTITY)] = run
            except KeyError as error:
                raise ValueError(f"{path}, line {number}: not a run record ({error!r})") from None

    def _key(self, side: str, model: str, fold: int, seed: int) -> tuple:
        found = dict(self.settings, side=side, model=model, fold=fold, seed=seed)
        return tuple(found[k] for k in self.IDENTITY)

    def seeds(self, fold: int) -> list[int]:
        """Every seed the record holds a run of on ``fold`` under these settings."""
        same = [r for r in self.runs.values() if all(r[k] == v for k, v in self.settings.items())]
        return sorted({run["seed"] for run in same if run["fold"] == fold})

    def get(self, side: str, model: str, fold: int, seed: int) -> dict | None:
        """The recorded run's metrics and lists/s, or ``None``."""
        return self.runs.get(self._key(side, model, fold, seed))

    def add(self, side: str, model: str, fold: int, seed: int, result: dict) -> dict:
        """Keeps a finished run (its metrics and lists/s), appended to ``path`` if any."""
        key = self._key(side, model, fold, seed)
        if key not in self.runs:
            kept = {k: result[k] for k in (*METRICS, "lists_per_sec")}
            self.runs[key] = dict(zip(self.IDENTITY, key), **kept, cpu=self.cpu)
            if self.path:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                append_line(self.path, self.runs[key])


def seeds_of(record: RunRecord, args) -> Callable[[int], list[int]]:
    """``fold -> its seeds``: with ``--seeds all`` every seed the record holds on it."""

    def seeds(fold: int) -> list[int]:
        if args.seeds == "all":
            return record.seeds(fold)
        return run_seeds(args.seed, args.seeds, fold, args.fold_seeds)

    return seeds


def recorded_runs(record: RunRecord, specs, folds, seeds, side: str, *, paired=True) -> tuple:
    """``(results, by_seed, left_out)`` of the record's runs on the sides ``side`` names:
    ``results[label][side][fold]`` a fold's runs, ``by_seed[label][side][fold, seed]`` each;
    ``paired`` keeps a (model, fold, seed) only when every side holds it; ``left_out``: the
    ``(side, model, fold, seed)`` the record lacks."""
    sides = {"both": ("ours", RELEASED), "ours": ("ours",), "released": (RELEASED,)}[side]
    results: dict = {s.label: {"ours": {}, RELEASED: {}} for s in specs}
    by_seed: dict = {s.label: {"ours": {}, RELEASED: {}} for s in specs}
    left_out = []
    for spec in specs:
        for fold in folds:
            for seed in seeds(fold):
                names = {"ours": spec.label, RELEASED: spec.model}
                found = {where: record.get(where, names[where], fold, seed) for where in sides}
                absent = [where for where, run in found.items() if run is None]
                left_out += [(where, spec.label, fold, seed) for where in absent]
                for where, run in found.items():
                    if run is not None and not (paired and absent):
                        results[spec.label][where].setdefault(fold, []).append(run)
                        by_seed[spec.label][where][fold, seed] = run
    return results, by_seed, left_out
