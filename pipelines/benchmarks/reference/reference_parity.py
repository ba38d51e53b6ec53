"""Our models beside the RankFormer authors' released code: same folds, seeds and epochs.

Every fold is converted with simulated clicks (purchase label 4); our models train for
``--epochs`` keeping the last weights, as the released protocol, and the released code runs
on the same folds (``--labels shared``: on our very lists, paired fold by fold). The tables go
to ``OUTPUT/parity.md`` and ``parity.json``; ``--record`` keeps finished runs, from which
``--recorded-only`` prints the tables again. Without the released code our side runs alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from pipelines.benchmarks import bench_support as support
from pipelines.benchmarks.reference import parity_sources as sources
from pipelines.benchmarks.reference.parity_tables import METRICS, RELEASED, summarize, tables_of
from pipelines.experiment_specs import parse_folds, parse_models
from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.core.config_io import write_json
from tfr_rankformer.core.run_layout import read_json

MODELS = ("rankformer", "transformer", "mlp")
FOLD_SEED_STRIDE = 1000  # with --fold-seeds, seed s on fold f is 1000 f + s


def run_seeds(first: int, count: int, fold: int, per_fold: bool) -> list[int]:
    """A fold's seeds on both sides; ``per_fold`` adds ``1000 * fold`` (no shared weights).

    >>> run_seeds(2, 3, 5, per_fold=False), run_seeds(2, 3, 5, per_fold=True)
    ([2, 3, 4], [5002, 5003, 5004])
    """
    offset = FOLD_SEED_STRIDE * fold if per_fold else 0
    return [offset + seed for seed in range(first, first + count)]


class RunRecord:
    """The runs of ``path`` by ``IDENTITY``; new runs are appended as they finish."""

    IDENTITY = ("dataset", "labels", "data_seed", "epochs", "side", "model", "fold", "seed")

    def __init__(self, path: str | None, args, cpu: str):
        self.path, self.cpu, self.args = path, cpu, args
        dataset = os.path.basename(os.path.normpath(args.dataset))
        self.settings = dict(
            dataset=dataset, labels=args.labels, data_seed=args.data_seed, epochs=args.epochs
        )
        self.runs: dict[tuple, dict] = {}
        found = support.read_lines(path) if path and os.path.isfile(path) else []
        for number, run in enumerate(found, 1):
            try:
                self.runs[tuple(run[k] for k in self.IDENTITY)] = run
            except KeyError as error:
                raise ValueError(f"{path}, line {number}: not a run record ({error!r})") from None

    def _key(self, side: str, model: str, fold: int, seed: int) -> tuple:
        found = dict(self.settings, side=side, model=model, fold=fold, seed=seed)
        return tuple(found[k] for k in self.IDENTITY)

    def seeds(self, fold: int) -> list[int]:
        """``fold``'s seeds: ``--seeds``', or with ``all`` every seed recorded on it."""
        if self.args.seeds != "all":
            return run_seeds(self.args.seed, self.args.seeds, fold, self.args.fold_seeds)
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
                support.append_line(self.path, self.runs[key])


def recorded_runs(record: RunRecord, *, paired=True) -> tuple:
    """``results[label][side][fold]`` (runs), ``by_seed[label][side][fold, seed]`` (a run) and
    the ``(side, model, fold, seed)`` left out; ``paired``: only those every side holds."""
    specs, folds = parse_models(record.args.models), parse_folds(record.args.folds)
    sides = {"both": ("ours", RELEASED), "ours": ("ours",), "released": (RELEASED,)}
    sides = sides[record.args.side]
    results: dict = {s.label: {"ours": {}, RELEASED: {}} for s in specs}
    by_seed: dict = {s.label: {"ours": {}, RELEASED: {}} for s in specs}
    left_out = []
    for spec in specs:
        for fold in folds:
            for seed in record.seeds(fold):
                names = {"ours": spec.label, RELEASED: spec.model}
                found = {where: record.get(where, names[where], fold, seed) for where in sides}
                absent = [where for where, run in found.items() if run is None]
                left_out += [(where, spec.label, fold, seed) for where in absent]
                for where, run in found.items():
                    if run is not None and not (paired and absent):
                        results[spec.label][where].setdefault(fold, []).append(run)
                        by_seed[spec.label][where][fold, seed] = run
    return results, by_seed, left_out


def build_parser() -> argparse.ArgumentParser:
    p = support.parser(__doc__, prog="reference_parity", epilog=__doc__.split("\n\n", 1)[1])
    sources.add_source_arguments(p)
    add = p.add_argument
    add("--folds", default="1-5", help="e.g. 1-5 or 1,3")
    add("--epochs", type=int, default=30, help="epochs on both sides")
    add("--seed", type=int, default=0, help="first seed on both sides, and of our clicks")
    add("--seeds", default="1", help="runs per model, fold and side; 'all': every recorded seed")
    add("--fold-seeds", action="store_true", help="seed s on fold f is 1000 f + s on both sides")
    add("--data-seed", type=int, help="our conversion's click seed (default: --seed)")
    lists = "shared: the released code takes our lists and clicks; own: it simulates its own"
    add("--labels", choices=["shared", "own"], default="shared", help=lists)
    models = "ours as tfr-experiment specs, each beside the released model of its NAME"
    add("--models", default=",".join(MODELS), help=models)
    add("--output", required=True, help="where data, runs and the table go")
    add("--side", choices=["both", "ours", "released"], default="both", help="the sides run")
    add("--official-threads", type=int, default=2, help="torch's threads for the released code")
    record = "a JSON-lines file of finished runs: those in it are reused, new ones appended"
    add("--record", metavar="FILE", help=record)
    only = "run nothing: print the tables from --record's runs, listing those it lacks"
    add("--recorded-only", action="store_true", help=only)
    return p


def parse_args(argv: list[str] | None, p: argparse.ArgumentParser | None = None):
    """``argv`` parsed, ``data_seed`` and ``seeds`` (an int, or ``"all"``) settled."""
    p = p or build_parser()
    args = p.parse_args(argv)
    if args.data_seed is None:
        args.data_seed = args.seed
    if args.seeds == "all" and not args.recorded_only:
        p.error("--seeds all needs --recorded-only")
    if args.seeds != "all":
        if not args.seeds.isdigit() or int(args.seeds) < 1:
            p.error(f"--seeds must be an int >= 1 or 'all', got {args.seeds}")
        args.seeds = int(args.seeds)
    if args.recorded_only and not args.record:
        p.error("--recorded-only needs --record FILE")
    return args


def ours(spec, fold_data: str, run_dir: str, args, seed: int) -> dict:
    """Trains one of our models (or reuses its finished run); its test metrics and speed."""
    from tfr_rankformer.runner import train
    from tfr_rankformer.training.train_config import TrainConfig

    metrics_path = os.path.join(run_dir, "metrics.json")
    if not os.path.isfile(metrics_path):
        values = {"model": spec.model, "data": fold_data, "model_dir": run_dir}
        values.update(epochs=args.epochs, seed=seed, keep_weights="last", **dict(spec.settings))
        train(TrainConfig.from_flat(values), verbose=0, existing="resume")
    test, rates = read_json(metrics_path)["test"], support.epoch_rates(run_dir)
    return {**{k: test[k] for k in METRICS}, "lists_per_sec": statistics.median(rates)}


def run_or_reuse(args, specs, folds, record: RunRecord) -> tuple[dict, dict] | None:
    """Runs what the record lacks on the sides ``--side`` names, after saying what will run;
    ``(results, by_seed)``, or ``None`` when it cannot go on."""
    from tqdm.auto import tqdm

    names = sorted({s.model for s in specs})
    runs = [(f, s) for f in folds for s in record.seeds(f)]

    def lacks(side: str, models) -> bool:
        return any(record.get(side, m, f, s) is None for m in models for f, s in runs)

    missing_ours = args.side != "released" and lacks("ours", [s.label for s in specs])
    missing_released = args.side != "ours" and lacks(RELEASED, names)
    setup = sources.official_setup(args) if missing_released else None
    if missing_released and setup is None:
        if args.record:
            print(f"(the released code's runs recorded in {args.record} are shown)")
        elif args.side == "released":
            return None
    elif args.record and not missing_ours and not missing_released:
        print(f"Every run comes from {args.record}: nothing is trained or run.")
    needed = missing_ours or (missing_released and setup is not None)
    paths = sources.convert_folds(args, folds, args.data_seed) if needed else {}
    for fold, seed in tqdm(runs, unit="fold and seed"):
        for spec in specs if args.side != "released" else ():
            if record.get("ours", spec.label, fold, seed) is None:
                where = os.path.join(args.output, "ours", spec.slug, f"Fold{fold}", f"seed{seed}")
                found = ours(spec, paths[fold], where, args, seed)
                record.add("ours", spec.label, fold, seed, found)
        missing = [n for n in names if record.get(RELEASED, n, fold, seed) is None]
        if args.side != "ours" and missing and setup is not None:
            shared = args.labels == "shared"
            files = sources.shared_lists(paths[fold]) if shared else sources.fold_files(args, fold)
            try:
                found = sources.theirs(setup, fold, missing, args, seed, files)
            except RuntimeError as error:
                print(f"reference_parity: {error}", file=sys.stderr)
                return None
            for name, run in found.items():
                record.add(RELEASED, name, fold, seed, run)
    results, by_seed, _ = recorded_runs(record, paired=False)
    return results, by_seed


def _report(args: argparse.Namespace, cpu: str, results: dict, by_seed: dict, note: str) -> None:
    """Prints the tables and writes them to ``parity.md``, the runs to ``parity.json``."""
    text = note + tables_of(results, by_seed, args, cpu)
    print(text)
    os.makedirs(args.output, exist_ok=True)
    with atomic_write(os.path.join(args.output, "parity.md")) as f:
        f.write(text)
    fold_means, rows, paired = summarize(results, args.labels)
    summary = {"settings": vars(args), "cpu": cpu, "runs": results, "fold_means": fold_means}
    summary.update(summary=rows, paired_differences=paired)
    write_json(os.path.join(args.output, "parity.json"), summary)


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = parse_args(argv, p)
    specs = parse_models(args.models)
    bad = [s.label for s in specs if s.model not in MODELS]
    if bad:
        p.error(f"{bad}: the released code has {list(MODELS)} only")
    folds = parse_folds(args.folds)
    cpu = support.cpu_extensions()
    try:
        record = RunRecord(args.record, args, cpu)
    except ValueError as error:
        p.error(str(error))
    note = ""
    if args.recorded_only:
        results, by_seed, left_out = recorded_runs(record)
        note = f"From {args.record} alone: nothing is trained or run.\n"
        if left_out:
            note += f"Left out, not in it ({len(left_out)}; with their other side's runs):\n"
            note += "".join(f"  {w} {label} Fold{f} seed {s}\n" for w, label, f, s in left_out)
        note += "\n"
    else:
        found = run_or_reuse(args, specs, folds, record)
        if found is None:
            return 1
        results, by_seed = found
    _report(args, cpu, results, by_seed, note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
