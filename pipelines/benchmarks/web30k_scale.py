"""The pipeline at MSLR-WEB30K's size with default flags, each stage in its own process.

Per protocol (``explicit`` labels or simulated ``clicks``) it runs this
environment's console scripts, one process per stage, and measures each one's
wall time and peak resident memory (its own and its descendants', ``os.wait4``):

1. ``tfr-convert --input synthetic``: ``--lists`` train queries (WEB30K's train
   fold holds about 60% of its 31,531) of 120 items on average, spread as
   WEB30K's; vali and test get a third each. Existing data is reused.
2. ``tfr-train``, one epoch of each model (the GBDT: its whole fit; on clicks,
   ``--click-epochs`` epochs), reading the training's items/s, seconds and
   estimated peak memory from the run's ``metrics.json``, and its lists/s:
   the median of its epochs' rates in ``history.csv``.
3. On explicit labels, each neural model again with ``--length-buckets off``
   and batches of ``32768 // longest train list`` lists (the same worst-case
   items per batch, unbucketed): bucketed lists/s / padded lists/s.
4. ``tfr-eval`` and 5. ``tfr-export`` of the rankformer run.
6. On clicks, when set up (see ``reference_parity``), the authors' released
   rankformer on the very same lists for as many epochs, once per
   ``--official-batch-sizes`` entry (``web30k_released``): the ratio of our
   lists/s to theirs. Our first epoch parses the records and applies the
   quantile transform, which theirs does before its epochs and outside their
   timing; our later epochs read the parsed, normalised lists from a cache.
   With ``--click-epochs 3`` each side's median epoch is one of its steady
   epochs, and our first epoch's rate is printed too.

The table also goes to ``OUTPUT/web30k_scale.md`` with the command line;
``OUTPUT/web30k_scale.jsonl`` holds the run's settings, then one JSON object
per stage (``--reprint`` prints the table from it). Stage logs go to
``OUTPUT/logs/``; a failing stage's record keeps the log's last lines.

Usage::

    python -m pipelines.benchmarks.web30k_scale --output results/web30k_scale \\
        [--lists 18900] [--models rankformer,transformer,mlp,gbdt] \\
        [--protocols explicit,clicks] [--official-dir D --official-python P] \\
        [--official-batch-sizes 128,1024] [--click-epochs 3]

``--quick`` (600 queries) is a smoke run of a few minutes.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import shlex
import shutil
import statistics
import sys

from pipelines.benchmarks.bench_support import cpu_extensions, read_json, run_stage
from pipelines.benchmarks.reference.parity_sources import official_setup
from pipelines.benchmarks.run_records import read_records, reprint, write_records
from pipelines.benchmarks.web30k_released import add_released_options, released
from pipelines.flag_table import add_flag
from tfr_rankformer.core import model_families
from tfr_rankformer.core.run_layout import HISTORY_NAME
from tfr_rankformer.inputs.manifest import MANIFEST_NAME, Manifest, read_manifest

MODELS = ("rankformer", "transformer", "mlp", "gbdt")
NEURAL = tuple(m for m in MODELS if model_families.is_neural(m))
# The model timed against the authors' released code, and evaluated and exported.
OURS = "rankformer"
PROTOCOLS = ("explicit", "clicks")
WEB30K_TRAIN_QUERIES = 18_900
QUICK_QUERIES = 600
BATCH_ITEMS = 32_768  # tfr-train's default --batch-items
GIB = 2**30
COLUMNS = (  # the stage table's figures as "record key:format"; bytes are shown in GiB
    "wall_seconds:.1f peak_rss_bytes:.2f estimated_peak_bytes:.2f estimate_share:.2f "
    "lists_per_sec:,.0f items_per_sec:,.0f train_seconds:.1f"
).split()
HEAD = "protocol|stage|model|wall s|peak RSS GiB|est. peak GiB|est. / measured|lists/s|items/s"
HEAD += "|train s|note"


def tool(name: str) -> str:
    """A console script of this project, from the running Python's environment."""
    return os.path.join(os.path.dirname(sys.executable), name)


def _manifest(data: str) -> Manifest | None:
    """The manifest of the converted ``data``, or ``None`` when there is none yet."""
    path = os.path.join(data, MANIFEST_NAME)
    return read_manifest(path) if os.path.isfile(path) else None


def convert(args, protocol: str, earlier: dict) -> dict:
    """Stage 1: the synthetic WEB30K-sized data of ``protocol`` (reused when present)."""
    data = os.path.join(args.output, "data", protocol)
    key = {"protocol": protocol, "stage": "convert", "model": "-"}
    manifest = _manifest(data)
    if manifest is not None:
        queries = manifest.split("train").input_lists
        if queries not in (None, args.lists):
            print(f"warning: reusing {data}, of {queries} train queries, not {args.lists}")
        return {**earlier.get(("convert", protocol, "-"), {}), **key, "reused": True}
    if args.skip_convert:
        return {**key, "failure": f"no {data}/manifest.json (--skip-convert)"}
    shutil.rmtree(data, ignore_errors=True)  # an unfinished conversion
    command = [tool("tfr-convert"), "--input", "synthetic", "--synthetic-lists", str(args.lists)]
    command += ["--synthetic-list-size", "120", "--synthetic-length-spread", "web30k"]
    command += ["--output", data, "--no-progress"]
    command += ["--simulate-clicks"] if protocol == "clicks" else []
    record = {**key, **run_stage(command, _log(args, protocol, "convert", "-"))}
    manifest = _manifest(data)
    if manifest is not None and not record["returncode"]:
        splits = manifest.splits.values()
        record["lists"] = sum(s.num_lists for s in splits)
        record["items"] = sum(s.num_items for s in splits)
        record["lists_per_sec"] = record["lists"] / record["wall_seconds"]
        record["items_per_sec"] = record["items"] / record["wall_seconds"]
    return record


def _log(args, protocol: str, stage: str, model: str) -> str:
    name = f"{protocol}-{stage}" + (f"-{model}" if model != "-" else "")
    return os.path.join(args.output, "logs", name + ".log")


def train(args, protocol: str, model: str, padded_batch: int | None = None) -> dict:
    """Stages 2 and 3: one epoch of ``model`` (on clicks ``--click-epochs``; the GBDT:
    its whole fit) with default flags, or with ``padded_batch`` lists per batch
    and no length buckets."""
    stage = "train" if padded_batch is None else "train-padded"
    run_dir = os.path.join(args.output, "runs", protocol, model + ("-padded" * bool(padded_batch)))
    shutil.rmtree(run_dir, ignore_errors=True)
    data = os.path.join(args.output, "data", protocol)
    command = [tool("tfr-train"), "--model", model, "--data", data, "--model-dir", run_dir]
    # The GBDT refuses --epochs: its one fit is its epoch.
    epochs = args.click_epochs if protocol == "clicks" else 1
    command += ["--no-export", *(["--epochs", str(epochs)] if model in NEURAL else [])]
    if padded_batch:
        command += ["--length-buckets", "off", "--batch-size", str(padded_batch)]
    record = {"protocol": protocol, "stage": stage, "model": model}
    record.update(run_stage(command, _log(args, protocol, stage, model)))
    metrics = read_json(os.path.join(run_dir, "metrics.json")) or {}
    record["training"] = training = metrics.get("training") or {}
    record["train_seconds"] = training.get("seconds")
    record["estimated_peak_bytes"] = training.get("estimated_peak_bytes")
    lists = training.get("lists_per_epoch", training.get("lists"))
    items = training.get("items_per_epoch", training.get("items"))
    record["epoch_lists_per_sec"] = rates = _epoch_rates(run_dir)
    rate = statistics.median(rates) if rates else training.get("lists_per_sec")
    if rate is None and lists and training.get("seconds"):  # the GBDT: its whole fit
        rate = lists / training["seconds"]
    record["lists_per_sec"] = rate
    if rate and lists and items:
        record["items_per_sec"] = rate * items / lists
    return record


def _epoch_rates(run_dir: str) -> list[float]:
    """Each epoch's training lists/s from the run's ``history.csv`` (none for the GBDT)."""
    path = os.path.join(run_dir, HISTORY_NAME)
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", newline="") as f:
        return [
            float(row["lists_per_sec"]) for row in csv.DictReader(f) if row.get("lists_per_sec")
        ]


def _fmt(value, spec: str, scale: float = 1.0) -> str:
    return "–" if value is None else format(value / scale, spec)


def row(r: dict) -> str:
    """A stage's row of the table (markdown)."""
    estimate, peak = r.get("estimated_peak_bytes"), r.get("peak_rss_bytes")
    r = {**r, "estimate_share": estimate / peak if estimate and peak else None}
    cells = [r["protocol"], r["stage"], r["model"]]
    for key, spec in (column.split(":") for column in COLUMNS):
        cells.append(_fmt(r.get(key), spec, GIB if key.endswith("_bytes") else 1))
    cells.append(r.get("failure") or ("reused" if r.get("reused") else ""))
    return f"| {' | '.join(cells)} |"


def report(run: dict, records: list[dict]) -> str:
    """The markdown report: header, per-stage table, bucketed/padded and ours/theirs."""
    lines = [f"# Pipeline at MSLR-WEB30K's size ({run['lists']:,} train queries)", ""]
    lines += [f"CPU: {run['cpu']}; {run['date']}", "", f"Command: `{run['command']}`", ""]
    lines += [f"| {HEAD.replace('|', ' | ')} |", "|---|---|---|" + "---:|" * 7 + "---|"]
    lines += [row(r) for r in records]
    found = {(r["protocol"], r["stage"], r["model"]): r for r in records}

    def rate(*key) -> float | None:
        r = found.get(key)
        return None if r is None or r.get("failure") else r.get("lists_per_sec")

    pairs = [(m, rate("explicit", "train", m), rate("explicit", "train-padded", m)) for m in NEURAL]
    pairs = [p for p in pairs if ("explicit", "train-padded", p[0]) in found]
    if pairs:
        lines += ["", "Length buckets against padded batches (explicit labels, training lists/s):"]
        lines += ["", "| model | bucketed | padded | bucketed / padded |", "|---|---:|---:|---:|"]
        for model, fast, slow in pairs:
            ratio = _fmt(fast / slow if fast and slow else None, ".2f")
            lines.append(f"| {model} | {_fmt(fast, ',.0f')} | {_fmt(slow, ',.0f')} | {ratio} |")
    ours = rate("clicks", "train", OURS)
    epochs = (found.get(("clicks", "train", OURS)) or {}).get("epoch_lists_per_sec") or []
    for r in (r for r in records if r["stage"].startswith("released")):
        theirs = None if r.get("failure") else r.get("lists_per_sec")
        ratio = _fmt(ours / theirs if ours and theirs else None, ".2f")
        said = r.get("failure") or _fmt(theirs, ",.0f")
        batch = f" at {r['batch_size']:,} lists per batch" if r.get("batch_size") else ""
        lines += ["", f"RankFormer on the same clicks lists, lists/s: ours {_fmt(ours, ',.0f')}"]
        if len(epochs) > 1:
            lines[-1] += f" (median of {len(epochs)} epochs; first epoch {epochs[0]:,.0f})"
        lines[-1] += f", released code{batch} {said}; ours / theirs {ratio}."
    return "\n".join(lines) + "\n"


def _names(text: str, allowed: tuple[str, ...], what: str, p) -> list[str]:
    names = [n for n in text.split(",") if n]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        p.error(f"--{what}: {bad or 'none given'}; choose from {','.join(allowed)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's options: what runs, and the released code's group."""
    p = argparse.ArgumentParser(
        prog="web30k_scale", description=__doc__.split("\n\n")[0], epilog=__doc__
    )
    add_flag(p, "output", required=True, help="where data, runs, logs and the table go")
    add_flag(p, "lists", help=f"train queries. Default: {WEB30K_TRAIN_QUERIES:,}")
    p.add_argument("--quick", action="store_true", help=f"--lists {QUICK_QUERIES}: a smoke run")
    add_flag(p, "models", default=",".join(MODELS), help="Default: %(default)s")
    p.add_argument("--protocols", default=",".join(PROTOCOLS), help="Default: %(default)s")
    p.add_argument("--skip-convert", action="store_true", help="never convert: use OUTPUT/data")
    add_flag(p, "reprint")
    p.add_argument(
        "--click-epochs",
        type=int,
        default=1,
        help="epochs of each neural model, and of the released code, on clicks. Default: 1",
    )
    add_released_options(p)
    return p


def _checked(p: argparse.ArgumentParser, args) -> tuple[list[str], list[str]]:
    """Settles ``args.lists`` (``--quick``, ``--lists`` or WEB30K's); the models and
    protocols to run. Bad values end the program through ``p.error``."""
    if args.quick and args.lists is not None:
        p.error("--quick sets --lists; give one of them")
    args.lists = QUICK_QUERIES if args.quick else args.lists or WEB30K_TRAIN_QUERIES
    if args.lists < 3:
        p.error(f"--lists must be >= 3, got {args.lists}")
    if args.click_epochs < 1:
        p.error(f"--click-epochs must be >= 1, got {args.click_epochs}")
    models = _names(args.models, MODELS, "models", p)
    return models, _names(args.protocols, PROTOCOLS, "protocols", p)


def _recorder(jsonl: str, run: dict, records: list[dict]):
    """``done(record)``: appends a finished stage's record to ``records``, rewrites
    ``jsonl`` and prints the stage's row (and a failing stage's log tail)."""

    def done(record: dict) -> dict:
        records.append(record)
        write_records(jsonl, run, records, kind="stage")
        print(row(record), flush=True)
        if record.get("tail"):
            print(record["tail"], end="")
        return record

    return done


def _run_protocol(args, protocol: str, models: list[str], setup, earlier: dict, done) -> None:
    """Every stage of one protocol, in order; each record goes to ``done``."""
    if done(convert(args, protocol, earlier)).get("failure"):
        return
    manifest = _manifest(os.path.join(args.output, "data", protocol))
    trained = {m: done(train(args, protocol, m)) for m in models}
    if protocol == "explicit":
        batch = max(1, BATCH_ITEMS // manifest.split("train").longest_list)
        for model in (m for m in models if m in NEURAL):
            done(train(args, protocol, model, padded_batch=batch))
    ours = trained.get(OURS, {"failure": "not trained"})
    if not ours.get("failure"):
        run_dir = os.path.join(args.output, "runs", protocol, OURS)
        for stage in ("eval", "export"):
            command = [tool(f"tfr-{stage}"), "--model-dir", run_dir]
            log = _log(args, protocol, stage, OURS)
            record = {"protocol": protocol, "stage": stage, "model": OURS}
            done({**record, **run_stage(command, log)})
    if protocol == "clicks" and OURS in models:
        data = os.path.join(args.output, "data", "clicks")

        def log(stage: str) -> str:
            return _log(args, "clicks", stage, OURS)

        for record in released(args, setup, ours, data, _manifest(data), log):
            done(record)


def _finish(run: dict, records: list[dict], markdown: str, jsonl: str) -> int:
    """Writes and prints the report; 1 when one of our stages failed."""
    text = report(run, records)
    with open(markdown, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"\n{text}wrote {markdown} and {jsonl}")
    failed = [r for r in records if r.get("failure") and not r["stage"].startswith("released")]
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    jsonl = os.path.join(args.output, "web30k_scale.jsonl")
    markdown = os.path.join(args.output, "web30k_scale.md")
    if args.reprint:
        return reprint(p, jsonl, report)
    models, protocols = _checked(p, args)
    words = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "-m", "pipelines.benchmarks.web30k_scale", *words])
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    run = dict(command=command, cpu=cpu_extensions(), date=date, lists=args.lists)
    os.makedirs(args.output, exist_ok=True)
    earlier = {(r["stage"], r["protocol"], r["model"]): r for r in read_records(jsonl)[1]}
    setup = official_setup(args) if "clicks" in protocols and OURS in models else None
    records: list[dict] = []
    done = _recorder(jsonl, run, records)
    print(f"| {HEAD.replace('|', ' | ')} |")
    for protocol in protocols:
        _run_protocol(args, protocol, models, setup, earlier, done)
    return _finish(run, records, markdown, jsonl)


if __name__ == "__main__":
    sys.exit(main())
