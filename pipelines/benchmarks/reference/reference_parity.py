"""Our models beside the RankFormer authors' released code: same folds, seeds and epochs.

For every fold it converts the LETOR data with simulated clicks (a purchase is
label 4, as in the released code), trains our ``rankformer``, ``transformer``
and ``mlp`` with their defaults for ``--epochs`` epochs keeping the last
epoch's weights (the released protocol: no validation, no early stopping), and
runs the released code on the same fold, seeds and epochs through
``reference_runner.py`` in a Python that has torch.

Which lists the released code sees (``--labels``):

* ``shared`` (the default): the very lists and simulated clicks of our
  conversion, train and test, written to ``data/FoldN/lists/*.npz``; the
  released code fits its own quantile transform on them and simulates
  nothing. Both sides are then scored on the same test labels, so the
  difference per fold is paired and its standard error is printed too.
* ``own``: the released code simulates its own clicks with its own random
  generator from the LETOR files (its ``main.py``'s way), so the two sides see
  lists drawn from the same distribution, not the same lists.

``--seeds N`` runs seeds ``--seed`` .. ``--seed + N - 1`` on both sides (the
data is converted once, with ``--seed``; with ``--labels own`` the released
code's seed also draws its clicks). A fold's figure is the mean over its seeds.

It prints one table, mean ± standard error over the folds: test NDCG_y@10,
NDCG_r@10, NDCG_y@10 on lists whose label is the highest level (t = max), the
difference to the released code and whether it lies within the released
code's standard error, and training lists/s (median over epochs; this
machine's CPU vector extensions are printed with it); on shared lists, the
differences fold by fold (where ours is ahead, the lowest and highest); with
two seeds or more, each seed's own comparison over the folds both sides ran it
on; and on each side every pair of models compared fold by fold. ``parity.md`` and
``parity.json`` go to ``--output``; finished runs are reused on a rerun.
``--record FILE`` also keeps every finished run, with its settings, in one
small JSON-lines file: a benchmark too long for one sitting or one machine
(the paper's 200 epochs take hours on the released code) is finished
elsewhere by rerunning with the same file, and the table is printed from it
without rerunning anything; ``--recorded-only`` prints it from the record part
of the way through, from the folds and seeds both sides hold, and lists the rest.

Usage::

    python -m pipelines.benchmarks.reference.reference_parity --dataset MQ2008 --data-dir DIR \\
        --folds 1-5 --epochs 30 --seeds 3 --output results/parity \\
        --official-dir rankformer-official --official-python ref-venv/bin/python

Without the released code (``--official-dir``, or ``$RANKFORMER_OFFICIAL_DIR``)
or a Python with torch (``--official-python``, or
``$RANKFORMER_OFFICIAL_PYTHON``) it says how to set them up and runs our side.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys

from pipelines.benchmarks.bench_support import cpu_extensions
from pipelines.benchmarks.reference.parity_options import build_parser, parse_checked
from pipelines.benchmarks.reference.parity_records import (
    METRICS,
    RELEASED,
    RunRecord,
    recorded_runs,
    seeds_of,
)
from pipelines.benchmarks.reference.parity_seed_noise import over_runs
from pipelines.benchmarks.reference.parity_sources import (
    SETUP,
    convert_folds,
    fold_files,
    official_setup,
    shared_lists,
    theirs,
)
from pipelines.benchmarks.reference.parity_tables import (
    between_models,
    fold_by_fold,
    seed_by_seed,
    summarize,
    table,
)
from pipelines.experiment_specs import parse_folds, parse_models
from tfr_rankformer.core.config_io import write_json

MODELS = ("rankformer", "transformer", "mlp")


def ours(spec, fold_data: str, run_dir: str, args, seed: int) -> dict:
    """Trains one of our models (or reuses the finished run); its test metrics and speed."""
    from tfr_rankformer.runner import train
    from tfr_rankformer.training.train_config import TrainConfig

    metrics_path = os.path.join(run_dir, "metrics.json")
    if not os.path.isfile(metrics_path):
        config = TrainConfig.from_flat(
            {
                "model": spec.model,
                "data": fold_data,
                "model_dir": run_dir,
                "epochs": args.epochs,
                "seed": seed,
                "keep_weights": "last",
                **dict(spec.settings),
            }
        )
        train(config, verbose=0, existing="resume")  # an interrupted run continues
    with open(metrics_path, encoding="utf-8") as f:
        metrics = json.load(f)
    with open(os.path.join(run_dir, "history.csv"), encoding="utf-8") as f:
        rates = [float(row["lists_per_sec"]) for row in csv.DictReader(f)]
    return {**{k: metrics["test"][k] for k in METRICS}, "lists_per_sec": statistics.median(rates)}


def run_all(args, specs, folds, seeds, record: RunRecord, setup, paths) -> tuple[dict, dict]:
    """Every model, fold and seed on the sides ``args.side`` names: a run found in
    the record is reused, a missing one is run (the released side only with
    ``setup``) and recorded. Returns ``(results, by_seed)``: ``results[label][side]
    [fold]`` the fold's runs, one per seed, and ``by_seed[label][side][(fold, seed)]``
    each run; ``seeds(fold)`` gives a fold's seeds. Raises ``RuntimeError`` when the
    released code fails."""
    from tqdm.auto import tqdm

    run_ours = args.side != "released"
    names = sorted({s.model for s in specs})
    results: dict = {s.label: {"ours": {}, RELEASED: {}} for s in specs}
    # by_seed[label][side][(fold, seed)] = that run
    by_seed: dict = {s.label: {"ours": {}, RELEASED: {}} for s in specs}
    per_fold = len(specs) * run_ours + (args.side != "ours")
    bar = tqdm(total=sum(len(seeds(f)) for f in folds) * per_fold, unit="run")
    for fold in folds:
        files = None
        for seed in seeds(fold):
            for spec in specs if run_ours else ():
                bar.set_description(f"ours {spec.label} Fold{fold} seed {seed}")
                run = record.get("ours", spec.label, fold, seed)
                if run is None:
                    run_dir = os.path.join(
                        args.output, "ours", spec.slug, f"Fold{fold}", f"seed{seed}"
                    )
                    run = record.add(
                        "ours", spec.label, fold, seed, ours(spec, paths[fold], run_dir, args, seed)
                    )
                results[spec.label]["ours"].setdefault(fold, []).append(run)
                by_seed[spec.label]["ours"][fold, seed] = run
                bar.update()
            if args.side == "ours":
                continue
            bar.set_description(f"released code Fold{fold} seed {seed}")
            official = {n: record.get(RELEASED, n, fold, seed) for n in names}
            missing = [n for n, found in official.items() if found is None]
            if missing and setup is not None:
                if files is None:
                    shared = args.labels == "shared"
                    files = shared_lists(paths[fold]) if shared else fold_files(args, fold)
                try:
                    fresh = theirs(setup, fold, missing, args, seed, files)
                except RuntimeError:
                    bar.close()
                    raise
                for name, found in fresh.items():
                    official[name] = record.add(RELEASED, name, fold, seed, found)
            if all(found is not None for found in official.values()):
                for spec in specs:
                    side = results[spec.label][RELEASED]
                    side.setdefault(fold, []).append(official[spec.model])
                    by_seed[spec.label][RELEASED][fold, seed] = official[spec.model]
            bar.update()
    bar.close()
    return results, by_seed


def run_or_reuse(args, specs, folds, seeds, record: RunRecord) -> tuple[dict, dict] | None:
    """:func:`run_all` after saying what will run: without the released code, how to
    set it up; with a record that holds everything, that nothing runs. The folds are
    converted only for runs that will happen. ``None`` when it cannot go on (the
    released side alone without its code or a record, or a failed released run)."""
    run_ours = args.side != "released"
    names = sorted({s.model for s in specs})
    missing_ours = run_ours and any(
        record.get("ours", spec.label, fold, seed) is None
        for spec in specs
        for fold in folds
        for seed in seeds(fold)
    )
    missing_released = args.side != "ours" and any(
        record.get(RELEASED, name, fold, seed) is None
        for name in names
        for fold in folds
        for seed in seeds(fold)
    )
    setup = official_setup(args) if missing_released else None
    if missing_released and setup is None:
        print(SETUP)
        if args.record:
            print(f"(the released code's runs recorded in {args.record} are shown)")
        elif args.side == "released":
            return None
    elif args.record and not missing_ours and not missing_released:
        print(f"Every run comes from {args.record}: nothing is trained or run.")
    # The folds are converted only for runs that will happen.
    needed = missing_ours or (missing_released and setup is not None)
    paths = convert_folds(args, folds, args.data_seed) if needed else {}
    try:
        results, by_seed = run_all(args, specs, folds, seeds, record, setup, paths)
    except RuntimeError as error:
        print(f"reference_parity: {error}", file=sys.stderr)
        return None
    return results, by_seed


def _gather(
    args: argparse.Namespace, specs, folds, seeds, record: RunRecord
) -> tuple[dict, dict, str] | None:
    """``(results, by_seed, note)``: with ``--recorded-only`` the record's runs, the
    note listing what it lacks; otherwise :func:`run_or_reuse`'s, with no note.
    ``None`` when it cannot go on."""
    if not args.recorded_only:
        found = run_or_reuse(args, specs, folds, seeds, record)
        return None if found is None else (*found, "")
    results, by_seed, left_out = recorded_runs(record, specs, folds, seeds, args.side)
    note = f"From {args.record} alone: nothing is trained or run.\n"
    if left_out:
        note += f"Left out, not in it ({len(left_out)}; with their other side's runs):\n"
        note += "".join(f"  {w} {label} Fold{f} seed {s}\n" for w, label, f, s in left_out)
    return results, by_seed, note + "\n"


def _report(args: argparse.Namespace, cpu: str, results: dict, by_seed: dict, note: str) -> None:
    """Prints the tables after ``note`` and writes them to ``parity.md``, and every
    run with the settings and summaries to ``parity.json``, in ``--output``."""
    fold_means, rows, paired = summarize(results, args.labels)
    text = (
        note
        + table(rows, cpu, args, paired)
        + fold_by_fold(paired)
        + seed_by_seed(by_seed)
        + over_runs(by_seed)
        + between_models(fold_means, results)
    )
    print(text)
    os.makedirs(args.output, exist_ok=True)
    with open(os.path.join(args.output, "parity.md"), "w", encoding="utf-8") as f:
        f.write(text)
    write_json(
        os.path.join(args.output, "parity.json"),
        {
            "settings": vars(args),
            "cpu": cpu,
            "runs": results,
            "fold_means": fold_means,
            "summary": rows,
            "paired_differences": paired,
        },
    )


def main(argv: list[str] | None = None) -> int:
    p = build_parser(__doc__, MODELS)
    args = parse_checked(p, argv)
    specs = parse_models(args.models)
    bad = [s.label for s in specs if s.model not in MODELS]
    if bad:
        p.error(f"{bad}: the released code has {list(MODELS)} only")
    folds = parse_folds(args.folds)
    cpu = cpu_extensions()
    try:
        record = RunRecord(args.record, args, cpu)
    except ValueError as error:
        p.error(str(error))
    seeds = seeds_of(record, args)

    found = _gather(args, specs, folds, seeds, record)
    if found is None:
        return 1
    _report(args, cpu, *found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
