"""The pipeline at MSLR-WEB30K's size with default flags, each stage in its own process.

Per protocol (``explicit`` labels or simulated ``clicks``) it runs this
environment's console scripts, one process per stage, and measures each one's
wall time and peak resident memory (its own and its descendants', ``os.wait4``):

1. ``tfr-convert --input synthetic``: ``--lists`` train queries (WEB30K's train
   fold holds about 60% of its 31,531) of 120 items on average, spread as
   WEB30K's; vali and test get a third each. Existing data is reused.
2. ``tfr-train``, one epoch of each model (the GBDT: its whole fit), reading
   the training's lists/s, items/s, seconds and estimated peak memory from
   the run's ``metrics.json``.
3. On explicit labels, each neural model again with ``--length-buckets off``
   and batches of ``32768 // longest train list`` lists (the same worst-case
   items per batch, unbucketed): bucketed lists/s / padded lists/s.
4. ``tfr-eval`` and 5. ``tfr-export`` of the rankformer run.
6. On clicks, when set up (see ``reference_parity``), the authors' released
   rankformer for one epoch on the very same lists, with a time limit: the
   ratio of our lists/s to theirs.

The table also goes to ``OUTPUT/web30k_scale.md`` with the command line;
``OUTPUT/web30k_scale.jsonl`` holds the run's settings, then one JSON object
per stage (``--reprint`` prints the table from it). Stage logs go to
``OUTPUT/logs/``; a failing stage's record keeps the log's last lines.

Usage::

    python -m pipelines.benchmarks.web30k_scale --output results/web30k_scale \\
        [--lists 18900] [--models rankformer,transformer,mlp,gbdt] \\
        [--protocols explicit,clicks] [--official-dir D --official-python P]

``--quick`` (600 queries) is a smoke run of a few minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

from pipelines.benchmarks.reference_parity import (
    RUNNER,
    add_source_arguments,
    cpu_extensions,
    official_setup,
    shared_lists,
)

MODELS = ("rankformer", "transformer", "mlp", "gbdt")
NEURAL = ("rankformer", "transformer", "mlp")
PROTOCOLS = ("explicit", "clicks")
WEB30K_TRAIN_QUERIES = 18_900
QUICK_QUERIES = 600
BATCH_ITEMS = 32_768  # tfr-train's default --batch-items
RELEASED_BATCH = 2_048  # the released code's lists per batch
GIB = 2**30
TAIL_LINES = 20
COLUMNS = (  # the stage table's figures as "record key:format"; bytes are shown in GiB
    "wall_seconds:.1f peak_rss_bytes:.2f estimated_peak_bytes:.2f estimate_share:.2f "
    "lists_per_sec:,.0f items_per_sec:,.0f train_seconds:.1f"
).split()
# Runs a stage (argv: a JSON file for its result, then the command), reaps it with os.wait4
# and writes its exit code and peak RSS (KiB: its own and its waited-for descendants' largest).
LAUNCHER = """\
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"returncode": os.waitstatus_to_exitcode(status), "peak_rss_kib": usage.ru_maxrss}, f)
"""
HEAD = "protocol|stage|model|wall s|peak RSS GiB|est. peak GiB|est. / measured|lists/s|items/s"
HEAD += "|train s|note"


def tool(name: str) -> str:
    """A console script of this project, from the running Python's environment."""
    return os.path.join(os.path.dirname(sys.executable), name)


def run_stage(command: list[str], log: str, timeout: float | None = None) -> dict:
    """Runs ``command`` with its output in ``log``, through :data:`LAUNCHER`.

    A process's peak RSS as ``os.wait4`` reports it starts at its parent's own
    peak (Linux carries the parent's high-water mark over ``fork`` and
    ``exec``), so this process, which holds TensorFlow and the lists, does not
    start the stage itself: a bare Python does, reaps it and reports its figure.

    Args:
        command: The program and its arguments.
        log: File for its standard output and error (the command line first).
        timeout: Seconds after which the stage's processes are killed; ``None``: never.

    Returns:
        ``command``, ``log``, ``returncode``, ``wall_seconds``, ``peak_rss_bytes``
        and, when it failed, ``failure`` (why) and ``tail`` (the log's last lines).
    """
    os.makedirs(os.path.dirname(log), exist_ok=True)
    usage_file, timed_out = log + ".rusage.json", False
    with contextlib.suppress(FileNotFoundError):
        os.remove(usage_file)
    with open(log, "w", encoding="utf-8") as out:
        out.write(f"$ {shlex.join(command)}\n")
        out.flush()
        started = time.perf_counter()
        launcher = [sys.executable, "-c", LAUNCHER, usage_file, *command]
        child = subprocess.Popen(launcher, stdout=out, stderr=out, start_new_session=True)
        try:
            child.wait(timeout=timeout)
        except BaseException as error:  # the time limit, or Ctrl-C: end the stage's processes
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            timed_out = isinstance(error, subprocess.TimeoutExpired)
            if not timed_out:
                raise
        wall = time.perf_counter() - started
    usage = read_json(usage_file) or {}  # none when the launcher was killed
    with contextlib.suppress(FileNotFoundError):
        os.remove(usage_file)
    code, peak = usage.get("returncode", child.returncode), usage.get("peak_rss_kib")
    record = {"command": shlex.join(command), "log": log, "returncode": code, "wall_seconds": wall}
    record["peak_rss_bytes"] = None if peak is None else peak * 1024
    if timed_out:
        record["failure"] = f"timed out after {timeout:.0f} s"
    elif code < 0:
        name = signal.Signals(-code).name
        killed = "does not fit in memory" if name == "SIGKILL" else "killed"
        record["failure"] = f"{killed} (killed by {name})"
    elif code:
        record["failure"] = f"exit code {code}"
    if code:
        with open(log, encoding="utf-8", errors="replace") as f:
            record["tail"] = "".join(f.readlines()[-TAIL_LINES:])
    return record


def read_json(path: str) -> dict | None:
    """The JSON object in ``path``, or ``None`` when there is no such file."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def convert(args, protocol: str, earlier: dict) -> dict:
    """Stage 1: the synthetic WEB30K-sized data of ``protocol`` (reused when present)."""
    data = os.path.join(args.output, "data", protocol)
    key = {"protocol": protocol, "stage": "convert", "model": "-"}
    manifest = read_json(os.path.join(data, "manifest.json"))
    if manifest is not None:
        queries = manifest["splits"]["train"].get("input_lists")
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
    manifest = read_json(os.path.join(data, "manifest.json"))
    if manifest is not None and not record["returncode"]:
        splits = manifest["splits"].values()
        record["lists"] = sum(s["num_lists"] for s in splits)
        record["items"] = sum(s["num_items"] for s in splits)
        record["lists_per_sec"] = record["lists"] / record["wall_seconds"]
        record["items_per_sec"] = record["items"] / record["wall_seconds"]
    return record


def _log(args, protocol: str, stage: str, model: str) -> str:
    name = f"{protocol}-{stage}" + (f"-{model}" if model != "-" else "")
    return os.path.join(args.output, "logs", name + ".log")


def train(args, protocol: str, model: str, padded_batch: int | None = None) -> dict:
    """Stages 2 and 3: one epoch of ``model`` (the GBDT: its whole fit) with default
    flags, or with ``padded_batch`` lists per batch and no length buckets."""
    stage = "train" if padded_batch is None else "train-padded"
    run_dir = os.path.join(args.output, "runs", protocol, model + ("-padded" * bool(padded_batch)))
    shutil.rmtree(run_dir, ignore_errors=True)
    data = os.path.join(args.output, "data", protocol)
    command = [tool("tfr-train"), "--model", model, "--data", data, "--model-dir", run_dir]
    # The GBDT refuses --epochs: its one fit is its epoch.
    command += ["--no-export", *(["--epochs", "1"] if model in NEURAL else [])]
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
    rate = training.get("lists_per_sec")
    if rate is None and lists and training.get("seconds"):  # the GBDT: its whole fit
        rate = lists / training["seconds"]
    record["lists_per_sec"] = rate
    if rate and lists and items:
        record["items_per_sec"] = rate * items / lists
    return record


def released(args, setup, ours: dict) -> dict:
    """Stage 6: one epoch of the released rankformer on our clicks data's lists."""
    record = {"protocol": "clicks", "stage": "released", "model": "rankformer"}
    if setup is None:
        print("released code: not set up (--official-dir, --official-python: see reference_parity)")
        return {**record, "failure": "not set up"}
    data = os.path.join(args.output, "data", "clicks")
    manifest = read_json(os.path.join(data, "manifest.json"))
    if manifest is None or ours.get("failure"):
        return {**record, "failure": "no clicks data or no rankformer run of ours"}
    train_split = manifest["splits"]["train"]
    batch = min(RELEASED_BATCH, train_split["num_lists"])
    # Its backward pass holds a gradient the size of the whole padded batch per list.
    estimate = batch * batch * train_split["longest_list"] * manifest["num_features"] * 4
    record["estimated_peak_bytes"] = estimate
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if estimate > memory / 2:
        print(f"warning: the released code may need {estimate / GIB:.0f} GiB, over half the RAM")
    paths = shared_lists(data)
    directory, python = setup
    command = [python, RUNNER, "--official-dir", directory, "--train", paths["train"]]
    command += ["--test", paths["test"], "--epochs", "1", "--models", "rankformer"]
    command += ["--threads", str(args.official_threads)]
    log = _log(args, "clicks", "released", "rankformer")
    record.update(run_stage(command, log, timeout=args.official_timeout))
    with open(log, encoding="utf-8", errors="replace") as f:
        results = [json.loads(x) for x in f if x.startswith("{") and '"model"' in x]
    if results:
        record["lists_per_sec"] = results[-1].get("lists_per_sec")
        record["train_seconds"] = results[-1].get("train_seconds")
    return record


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
    released = found.get(("clicks", "released", "rankformer"))
    if released is not None:
        ours, theirs = (rate("clicks", stage, "rankformer") for stage in ("train", "released"))
        ratio = _fmt(ours / theirs if ours and theirs else None, ".2f")
        said = released.get("failure") or _fmt(theirs, ",.0f")
        lines += ["", f"Rankformer on the same clicks lists, lists/s: ours {_fmt(ours, ',.0f')}"]
        lines[-1] += f", released code {said}; ours / theirs {ratio}."
    return "\n".join(lines) + "\n"


def write_records(path: str, run: dict, records: list[dict]) -> None:
    """``web30k_scale.jsonl``: the run's settings, then one object per stage."""
    with open(path + ".partial", "w", encoding="utf-8") as f:
        for record in [{"stage": "run", **run}, *records]:
            f.write(json.dumps(record) + "\n")
    os.replace(path + ".partial", path)


def read_records(path: str) -> tuple[dict | None, list[dict]]:
    """The run's settings and stage records from ``web30k_scale.jsonl`` (if any)."""
    if not os.path.isfile(path):
        return None, []
    with open(path, encoding="utf-8") as f:
        run, *records = [json.loads(line) for line in f if line.strip()] or [None]
    return run, records


def _names(text: str, allowed: tuple[str, ...], what: str, p) -> list[str]:
    names = [n for n in text.split(",") if n]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        p.error(f"--{what}: {bad or 'none given'}; choose from {','.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="web30k_scale", description=__doc__.split("\n\n")[0], epilog=__doc__
    )
    p.add_argument("--output", required=True, help="where data, runs, logs and the table go")
    p.add_argument("--lists", type=int, help=f"train queries. Default: {WEB30K_TRAIN_QUERIES:,}")
    p.add_argument("--quick", action="store_true", help=f"--lists {QUICK_QUERIES}: a smoke run")
    p.add_argument("--models", default=",".join(MODELS), help="Default: %(default)s")
    p.add_argument("--protocols", default=",".join(PROTOCOLS), help="Default: %(default)s")
    p.add_argument("--skip-convert", action="store_true", help="never convert: use OUTPUT/data")
    p.add_argument("--reprint", action="store_true", help="print the last run's table again")
    group = p.add_argument_group("released code (--dataset, --data-dir: not used here)")
    add_source_arguments(group)
    group.add_argument("--official-timeout", type=float, default=1800.0, help="Default: 1800 s")
    group.add_argument("--official-threads", type=int, default=2, help="its threads. Default: 2")
    args = p.parse_args(argv)
    jsonl = os.path.join(args.output, "web30k_scale.jsonl")
    markdown = os.path.join(args.output, "web30k_scale.md")
    if args.reprint:
        run, records = read_records(jsonl)
        if run is None:
            p.error(f"nothing to reprint: no {jsonl}")
        print(report(run, records), end="")
        return 0
    if args.quick and args.lists is not None:
        p.error("--quick sets --lists; give one of them")
    args.lists = QUICK_QUERIES if args.quick else args.lists or WEB30K_TRAIN_QUERIES
    if args.lists < 3:
        p.error(f"--lists must be >= 3, got {args.lists}")
    models = _names(args.models, MODELS, "models", p)
    protocols = _names(args.protocols, PROTOCOLS, "protocols", p)
    words = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "-m", "pipelines.benchmarks.web30k_scale", *words])
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    run = dict(command=command, cpu=cpu_extensions(), date=date, lists=args.lists)
    os.makedirs(args.output, exist_ok=True)
    earlier = {(r["stage"], r["protocol"], r["model"]): r for r in read_records(jsonl)[1]}
    setup = official_setup(args) if "clicks" in protocols and "rankformer" in models else None
    records: list[dict] = []
    print(f"| {HEAD.replace('|', ' | ')} |")

    def done(record: dict) -> dict:
        records.append(record)
        write_records(jsonl, run, records)
        print(row(record), flush=True)
        if record.get("tail"):
            print(record["tail"], end="")
        return record

    for protocol in protocols:
        if done(convert(args, protocol, earlier)).get("failure"):
            continue
        manifest = read_json(os.path.join(args.output, "data", protocol, "manifest.json"))
        trained = {m: done(train(args, protocol, m)) for m in models}
        if protocol == "explicit":
            batch = max(1, BATCH_ITEMS // manifest["splits"]["train"]["longest_list"])
            for model in (m for m in models if m in NEURAL):
                done(train(args, protocol, model, padded_batch=batch))
        ours = trained.get("rankformer", {"failure": "not trained"})
        if not ours.get("failure"):
            run_dir = os.path.join(args.output, "runs", protocol, "rankformer")
            for stage in ("eval", "export"):
                command = [tool(f"tfr-{stage}"), "--model-dir", run_dir]
                log = _log(args, protocol, stage, "rankformer")
                record = {"protocol": protocol, "stage": stage, "model": "rankformer"}
                done({**record, **run_stage(command, log)})
        if protocol == "clicks" and "rankformer" in models:
            done(released(args, setup, ours))
    text = report(run, records)
    with open(markdown, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"\n{text}wrote {markdown} and {jsonl}")
    return 1 if any(r.get("failure") and r["stage"] != "released" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
