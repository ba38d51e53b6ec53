"""The pipeline at MSLR-WEB30K's size with default flags, each stage in its own process.

Per protocol: convert, train each model (on explicit labels also with padded batches), eval
and export, and on clicks the released RankFormer on the same lists; each stage's wall time and
peak memory go to ``OUTPUT/web30k_scale.jsonl`` (``--reprint``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys

from pipelines.benchmarks import bench_support as support
from pipelines.benchmarks.reference import parity_sources
from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.core.run_layout import read_json
from tfr_rankformer.inputs.manifest import MANIFEST_NAME, Manifest, read_manifest

NEURAL = ("rankformer", "transformer", "mlp")
MODELS = (*NEURAL, "gbdt")
OURS = "rankformer"  # timed against the released code, evaluated and exported
RELEASED_BATCH = 2_048  # the released code's lists per batch
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
    """A console script of this project, beside the running Python."""
    return os.path.join(os.path.dirname(sys.executable), name)


def _manifest(data: str) -> Manifest | None:
    path = os.path.join(data, MANIFEST_NAME)
    return read_manifest(path) if os.path.isfile(path) else None


def convert(args, protocol: str, earlier: dict) -> dict:
    """The synthetic WEB30K-sized data of ``protocol`` (reused when present)."""
    data = os.path.join(args.output, "data", protocol)
    key = {"protocol": protocol, "stage": "convert", "model": "-"}  # a record's identity
    manifest = _manifest(data)
    if manifest is not None:
        queries = manifest.split("train").input_lists
        if queries not in (None, args.lists):
            print(f"warning: reusing {data}, of {queries} train queries, not {args.lists}")
        return {**earlier.get(("convert", protocol, "-"), {}), **key, "reused": True}
    shutil.rmtree(data, ignore_errors=True)  # an unfinished conversion
    command = [tool("tfr-convert"), "--input", "synthetic", "--synthetic-lists", str(args.lists)]
    command += ["--synthetic-list-size", "120", "--synthetic-length-spread", "web30k"]
    command += ["--output", data, "--no-progress"]
    command += ["--simulate-clicks"] if protocol == "clicks" else []
    record = _stage(args, protocol, "convert", "-", command)
    manifest = _manifest(data)
    if manifest is not None and not record["returncode"]:
        splits = manifest.splits.values()
        record["lists"] = sum(s.num_lists for s in splits)
        record["items"] = sum(s.num_items for s in splits)
        record["lists_per_sec"] = record["lists"] / record["wall_seconds"]
        record["items_per_sec"] = record["items"] / record["wall_seconds"]
    return record


def _stage(args, protocol: str, stage: str, model: str, command: list[str], **timeout) -> dict:
    """A stage's record: what it ran, with ``support.run_stage``'s figures."""
    name = f"{protocol}-{stage}" + (f"-{model}" if model != "-" else "")
    log = os.path.join(args.output, "logs", name + ".log")
    return dict(
        protocol=protocol, stage=stage, model=model, **support.run_stage(command, log, **timeout)
    )


def train(args, protocol: str, model: str, padded_batch: int | None = None) -> dict:
    """``model`` trained with default flags (or ``padded_batch`` lists unbucketed)."""
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
    record = _stage(args, protocol, stage, model, command)
    metrics = read_json(os.path.join(run_dir, "metrics.json"))
    record["training"] = training = metrics.get("training") or {}
    record["train_seconds"] = training.get("seconds")
    record["estimated_peak_bytes"] = training.get("estimated_peak_bytes")
    lists = training.get("lists_per_epoch", training.get("lists"))
    items = training.get("items_per_epoch", training.get("items"))
    record["epoch_lists_per_sec"] = rates = support.epoch_rates(run_dir)
    rate = statistics.median(rates) if rates else training.get("lists_per_sec")
    if rate is None and lists and training.get("seconds"):  # the GBDT: its whole fit
        rate = lists / training["seconds"]
    record["lists_per_sec"] = rate
    if rate and lists and items:
        record["items_per_sec"] = rate * items / lists
    return record


def _fmt(value, spec: str, scale: float = 1.0) -> str:
    return "–" if value is None else format(value / scale, spec)


def row(r: dict) -> str:
    estimate, peak = r.get("estimated_peak_bytes"), r.get("peak_rss_bytes")
    r = {**r, "estimate_share": estimate / peak if estimate and peak else None}
    cells = [r["protocol"], r["stage"], r["model"]]
    for key, spec in (column.split(":") for column in COLUMNS):
        cells.append(_fmt(r.get(key), spec, GIB if key.endswith("_bytes") else 1))
    cells.append(r.get("failure") or ("reused" if r.get("reused") else ""))
    return f"| {' | '.join(cells)} |"


def report(run: dict, records: list[dict]) -> str:
    """The stages' table, bucketed against padded lists/s and ours against theirs."""
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


def released_estimate(manifest: Manifest, batch: int) -> int:
    """Bytes the released RankFormer's training holds at ``batch`` lists (a padded-batch
    gradient per list)."""
    longest = manifest.split("train").longest_list
    return batch * batch * longest * manifest.num_features * 4


def released_batches(text: str, manifest: Manifest) -> list[int]:
    """``--official-batch-sizes``: those listed, or ``auto``'s."""
    if text != "auto":
        return [int(x) for x in text.split(",") if x]
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    batch = RELEASED_BATCH
    while batch > 1 and released_estimate(manifest, batch) > memory / 2:
        batch //= 2
    return [batch]


def released(args, setup, ours: dict) -> list[dict]:
    """The released RankFormer on our clicks lists, once per batch size."""
    record = {"protocol": "clicks", "stage": "released", "model": OURS}
    data = os.path.join(args.output, "data", "clicks")
    manifest = _manifest(data)
    if setup is None:
        return [{**record, "failure": "not set up"}]
    if manifest is None or ours.get("failure"):
        return [{**record, "failure": "no clicks data or no rankformer run of ours"}]
    paths, (directory, python) = parity_sources.shared_lists(data), setup
    records = []
    for batch in released_batches(args.official_batch_sizes, manifest):
        batch = min(batch, manifest.split("train").num_lists)
        command = [python, parity_sources.RUNNER, "--official-dir", directory, "--models", OURS]
        command += ["--train", paths["train"], "--test", paths["test"], "--batch-size", str(batch)]
        command += ["--epochs", str(args.click_epochs), "--threads", str(args.official_threads)]
        stage, timeout = f"released-b{batch}", args.official_timeout
        result = _stage(args, "clicks", stage, OURS, command, timeout=timeout)
        result.update(batch_size=batch, estimated_peak_bytes=released_estimate(manifest, batch))
        with open(result["log"], encoding="utf-8", errors="replace") as f:
            for line in [json.loads(x) for x in f if x.startswith("{")]:  # sizes, then results
                keys = ("load_seconds", "lists_per_sec", "train_seconds")  # its median epoch's
                result.update({k: line[k] for k in keys if k in line})
        records.append(result)
    return records


def build_parser() -> argparse.ArgumentParser:
    p = support.parser(__doc__, prog="web30k_scale")
    add = p.add_argument
    add("--output", required=True, help="where data, runs, logs and the table go")
    add("--lists", type=int, help=f"train queries (default: WEB30K's {WEB30K_TRAIN_QUERIES:,})")
    add("--quick", action="store_true", help=f"--lists {QUICK_QUERIES}: a smoke run")
    models, protocols = support.names_of(MODELS), support.names_of(PROTOCOLS)
    add("--models", type=models, default=",".join(MODELS), help="comma-separated models")
    add("--protocols", type=protocols, default=",".join(PROTOCOLS), help="comma-separated")
    add("--reprint", action="store_true", help="print the last run's table again")
    add("--click-epochs", type=int, default=1, help="epochs of each model on clicks")
    group = p.add_argument_group("released code")
    parity_sources.add_source_arguments(group, folds=False)
    group.add_argument("--official-timeout", type=float, default=1800.0, help="seconds")
    group.add_argument("--official-threads", type=int, default=2, help="its threads")
    batches = "its lists per batch, a run each; auto: 2048 halved to fit half the memory"
    group.add_argument("--official-batch-sizes", default="auto", help=batches)
    return p


def _run_protocol(args, protocol: str, models: list[str], setup, earlier: dict, done) -> None:
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
            done(_stage(args, protocol, stage, OURS, command))
    if protocol == "clicks" and OURS in models:
        for record in released(args, setup, ours):
            done(record)


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    jsonl = os.path.join(args.output, "web30k_scale.jsonl")
    markdown = os.path.join(args.output, "web30k_scale.md")
    if args.reprint:
        return support.reprint(p, jsonl, report)
    if args.quick and args.lists is not None:
        p.error("--quick sets --lists; give one of them")
    args.lists = QUICK_QUERIES if args.quick else args.lists or WEB30K_TRAIN_QUERIES
    if args.lists < 3:
        p.error(f"--lists must be >= 3, got {args.lists}")
    if args.click_epochs < 1:
        p.error(f"--click-epochs must be >= 1, got {args.click_epochs}")
    models, protocols = args.models, args.protocols
    run = dict(support.run_line("web30k_scale", argv), lists=args.lists)
    os.makedirs(args.output, exist_ok=True)
    earlier = {(r["stage"], r["protocol"], r["model"]): r for r in support.read_records(jsonl)[1]}
    released_too = "clicks" in protocols and OURS in models
    setup = parity_sources.official_setup(args) if released_too else None
    records: list[dict] = []

    def done(record: dict) -> dict:  # a finished stage: recorded, its row printed
        records.append(record)
        support.write_records(jsonl, run, records, kind="stage")
        print(row(record), flush=True)
        print(record.get("tail", ""), end="")
        return record

    print(f"| {HEAD.replace('|', ' | ')} |")
    for protocol in protocols:
        _run_protocol(args, protocol, models, setup, earlier, done)
    text = report(run, records)
    with atomic_write(markdown) as f:
        f.write(text)
    print(f"\n{text}wrote {markdown} and {jsonl}")
    failed = [r for r in records if r.get("failure") and not r["stage"].startswith("released")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
