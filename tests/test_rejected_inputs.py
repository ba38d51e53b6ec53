"""Every rejected input, its message, and the table of them in docs/rejected_inputs.md.

Each case below feeds one bad input to a command (or a client to a serving
signature) and checks that it fails as the project promises: a non-zero exit,
one ``<command>: error: ...`` line naming the file (and line or record) and no
traceback, no partial output; a signature raises ``INVALID_ARGUMENT`` with a
message naming the field. The table in ``docs/rejected_inputs.md`` is built
from the messages these cases produce, so it cannot drift: the last test fails
when the committed file differs, and ``make docs-rejected`` rewrites it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gzip
import io
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from tests.conftest import letor_line, write_lines  # noqa: E402
from tests.test_bad_input import BAD_LINES, GOOD_AFTER, GOOD_BEFORE  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "rejected_inputs.md"
REWRITE_ENV = "REWRITE_REJECTED_INPUTS"


@dataclasses.dataclass
class Env:
    """What the cases run against; ``tmp`` is the case's own directory."""

    tmp: Path
    servables: dict
    request: pytest.FixtureRequest

    def trained(self) -> tuple[str, str]:
        """``(model_dir, dataset)`` of the session's trained 136-feature RankFormer."""
        model_dir, _ = self.request.getfixturevalue("trained")
        return model_dir, self.request.getfixturevalue("dataset")


@dataclasses.dataclass(frozen=True)
class Case:
    command: str
    input: str
    run: Callable[[Env], str]
    id: str


# ---------------------------------------------------------------------------
# Running commands and signatures.
# ---------------------------------------------------------------------------


def _cli_error(main, argv: list[str], prog: str, env: Env, absent: list[Path]) -> str:
    """Runs a command that must fail; returns its error line with the case directory
    written as ``DIR``."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(argv)
    text = err.getvalue()
    assert rc != 0, out.getvalue()
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.startswith(f"{prog}: error: ")]
    assert len(lines) == 1, text
    for path in absent:
        assert not path.exists(), f"{prog} left {path} behind"
        assert not any(".partial" in name for name in os.listdir(path.parent)), path.parent
    return lines[0].replace(str(env.tmp), "DIR")


def _signature_error(call) -> str:
    """Calls a signature that must fail; returns the part of the message naming the input."""
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        call()
    message = info.value.message
    found = re.search(r"assertion failed: \[(invalid input: .*)\]", message) or re.search(
        r"(Key: features[^\[\n]*?Actual type: \w+)", message
    )
    assert found, message
    return found.group(1).replace("\\'", "'")


# ---------------------------------------------------------------------------
# tfr-convert.
# ---------------------------------------------------------------------------


def _convert(env: Env, data: bytes, *, name: str = "train.txt", sizes: bool = True) -> str:
    from pipelines.convert_cli import main

    source = env.tmp / "in"
    source.mkdir(exist_ok=True)
    (source / name).write_bytes(data)
    out = env.tmp / "out"
    argv = ["--input", str(source), "--output", str(out), "--no-progress", "--workers", "1"]
    if sizes:
        argv += ["--num-features", "3", "--max-relevance", "2"]
    return _cli_error(main, argv, "tfr-convert", env, [out])


def _letor(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def _with_bad_line(bad: str) -> bytes:
    return _letor(GOOD_BEFORE + [bad] + GOOD_AFTER)


def _gzip_lines(count: int = 400) -> bytes:
    lines = [f"{i % 3} qid:{i // 20} 1:0.{i:04d} 2:0.5 3:{i % 7}" for i in range(count)]
    return gzip.compress(_letor(lines), mtime=0)


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


def _wide_line() -> bytes:
    """Three-feature lines, then one listing features 1..1000."""
    wide = "1 qid:9 " + " ".join(f"{j}:0.5" for j in range(1, 1001))
    return _letor(GOOD_BEFORE + GOOD_AFTER + [wide])


def _convert_over_foreign(env: Env) -> str:
    """``--overwrite`` onto a directory holding the user's own files, which must survive."""
    from pipelines.convert_cli import main

    out = env.tmp / "out"
    (out / "raw").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    argv = ["--input", "synthetic", "--synthetic-lists", "3", "--output", str(out)]
    message = _cli_error(main, argv + ["--overwrite", "--no-progress"], "tfr-convert", env, [])
    assert sorted(os.listdir(out)) == ["notes.txt", "raw"]
    assert not [n for n in os.listdir(env.tmp) if n.startswith(".")], os.listdir(env.tmp)
    return message


def _convert_onto_mount_point(env: Env) -> str:
    """``--output`` naming a mount point (``os.path.ismount`` says so: no real mount)."""
    from pipelines.convert_cli import main

    out = env.tmp / "mnt"
    out.mkdir()
    ismount = os.path.ismount
    with mock.patch("os.path.ismount", lambda p: os.path.abspath(p) == str(out) or ismount(p)):
        argv = ["--input", "synthetic", "--synthetic-lists", "3", "--output", str(out)]
        message = _cli_error(main, argv + ["--no-progress"], "tfr-convert", env, [])
    assert os.listdir(out) == [] and sorted(os.listdir(env.tmp)) == ["mnt"]
    return message


def _convert_trec_docid(env: Env) -> str:
    """A TREC run whose docid is cp1252 ``caf\\xe9``, not UTF-8."""
    from pipelines.convert_cli import main

    files = {
        "queries.tsv": b"1\tcoffee\n",
        "collection.tsv": b"d1\tcoffee shop\n",
        "qrels.txt": b"1 0 d1 1\n",
        "run.txt": b"1 Q0 d1 1 2.0 bm25\n1 Q0 caf\xe9 2 1.0 bm25\n",
    }
    source = env.tmp / "in"
    source.mkdir()
    for name, data in files.items():
        (source / name).write_bytes(data)
    out = env.tmp / "out"
    argv = ["--input", "trec", "--queries", str(source / "queries.tsv"), "--collection"]
    argv += [str(source / "collection.tsv"), "--qrels", str(source / "qrels.txt")]
    argv += ["--run", str(source / "run.txt"), "--output", str(out)]
    return _cli_error(main, argv, "tfr-convert", env, [out])


def _convert_cases() -> list[Case]:
    cases = [
        Case(
            "tfr-convert",
            f"a line `{p.values[0]}`",
            lambda env, bad=p.values[0]: _convert(env, _with_bad_line(bad)),
            f"convert-{p.id}",
        )
        for p in BAD_LINES
    ]
    more = [
        ("a line `0x1 qid:1 1:0.5 2:0.1 3:0.2` (hex label)", "0x1 qid:1 1:0.5 2:0.1 3:0.2", "hex"),
        ("a line `1_0 qid:1 1:0.5 2:0.1 3:0.2` (digit separator)", "1_0 qid:1 1:0.5", "sep"),
        ("a label beyond int64", "99999999999999999999 qid:1 1:0.5", "label-int64"),
        ("a qid beyond int64", "1 qid:9223372036854775808 1:0.5", "qid-int64"),
        ("a value beyond float32, `3.5e38`", "1 qid:1 1:3.5e38 2:0 3:0", "float32"),
        ("a label above `--max-relevance 2`", "3 qid:1 1:0.5 2:0.1 3:0.2", "label-max"),
    ]
    cases += [
        Case("tfr-convert", text, lambda env, bad=bad: _convert(env, _with_bad_line(bad)), f"c-{i}")
        for text, bad, i in more
    ]
    qid_back = _letor(["1 qid:1 1:0 2:0 3:0", "1 qid:2 1:0 2:0 3:0", "1 qid:1 1:0 2:0 3:0"])
    gz = _gzip_lines()
    cases += [
        Case(
            "tfr-convert",
            "a qid that reappears after others",
            lambda env: _convert(env, qid_back),
            "qid-back",
        ),
        Case("tfr-convert", "an empty file", lambda env: _convert(env, b""), "empty"),
        Case(
            "tfr-convert",
            "a UTF-16 file",
            lambda env: _convert(env, _letor(GOOD_BEFORE).decode().encode("utf-16")),
            "utf16",
        ),
        Case(
            "tfr-convert",
            "a truncated `.gz`",
            lambda env: _convert(env, gz[: len(gz) // 2], name="train.txt.gz"),
            "gz-cut",
        ),
        Case(
            "tfr-convert",
            "a truncated `.gz`, sizes not given (scanned first)",
            lambda env: _convert(env, gz[: len(gz) // 2], name="train.txt.gz", sizes=False),
            "gz-cut-scan",
        ),
        Case(
            "tfr-convert",
            "a `.gz` with a corrupt byte",
            lambda env: _convert(env, _flip(gz, len(gz) - 6), name="train.txt.gz"),
            "gz-crc",
        ),
        Case(
            "tfr-convert",
            "a line reaching feature 1000 among 3-feature lines, `--num-features` not given",
            lambda env: _convert(env, _wide_line(), sizes=False),
            "wide-line",
        ),
        Case(
            "tfr-convert",
            "`--overwrite` onto a directory holding other files than tfr-convert's",
            _convert_over_foreign,
            "overwrite-foreign",
        ),
        Case("tfr-convert", "`--output` a mount point", _convert_onto_mount_point, "mount"),
        Case(
            "tfr-convert",
            "a TREC run's docid that is not UTF-8 (cp1252 `caf\\xe9`)",
            _convert_trec_docid,
            "trec-docid",
        ),
    ]
    return cases


# ---------------------------------------------------------------------------
# Converted data: tfr-train, tfr-eval, tfr-predict.
# ---------------------------------------------------------------------------


_CONVERTED: dict[str, Path] = {}


def _tiny_converted(env: Env) -> Path:
    """A fresh copy of a converted 3-feature dataset of 3 train lists (and vali, test)."""
    from pipelines.convert_cli import main

    if "data" not in _CONVERTED:
        root = env.request.getfixturevalue("tmp_path_factory").mktemp("tiny-converted")
        lines = [letor_line(i % 3, i // 3, [0.1 * i, 1.0, i % 2]) for i in range(9)]
        write_lines(root / "letor" / "train.txt", lines)
        write_lines(root / "letor" / "vali.txt", lines[:3])
        write_lines(root / "letor" / "test.txt", lines[3:6])
        argv = ["--input", str(root / "letor"), "--output", str(root / "data"), "--no-progress"]
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv + ["--workers", "1", "--log-level", "ERROR"]) == 0
        _CONVERTED["data"] = root / "data"
    out = env.tmp / "data"
    shutil.copytree(_CONVERTED["data"], out)
    return out


def _shard(data_dir: Path, split: str = "train") -> Path:
    return next(data_dir.glob(f"{split}-*.tfrecord"))


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "cut":
        data = data[:-20]
    elif how == "record":  # cut at a record boundary: the last record is missing
        first = 12 + int.from_bytes(data[:8], "little") + 4
        data = data[:first]
    elif how == "flip":
        data = _flip(data, 40)
    path.write_bytes(data)


def _broken_manifest(data_dir: Path, how: str) -> None:
    path = data_dir / "manifest.json"
    text = path.read_text()
    # Cut where the normalisation tables open, after the input paths: the reported
    # line and column must depend neither on the temporary directory's name nor on
    # the tables' numbers (their last digits differ between CPUs).
    start = text.index('"normalization"')
    cut = text[: text.index("{", start) + 1]
    path.write_text(cut if how == "cut" else text.replace('"splits"', '"x"'))


def _train(env: Env, damage) -> str:
    from pipelines.train_cli import main

    data = _tiny_converted(env)
    damage(data)
    run = env.tmp / "run"
    argv = ["--model", "mlp", "--data", str(data), "--model-dir", str(run), "--epochs", "1"]
    return _cli_error(main, argv + ["--quiet"], "tfr-train", env, [run])


def _train_into_foreign(env: Env) -> str:
    from pipelines.train_cli import main

    data = _tiny_converted(env)
    run = env.tmp / "mine"
    run.mkdir()
    (run / "notes.txt").write_text("not a run's")
    argv = ["--model", "mlp", "--data", str(data), "--model-dir", str(run), "--overwrite"]
    error = _cli_error(main, argv + ["--quiet"], "tfr-train", env, [])
    assert sorted(os.listdir(run)) == ["notes.txt"]
    return error


def _train_empty_split(env: Env) -> str:
    """A dataset whose train lists ``--min-list-size 4`` all dropped (they hold 3 items)."""
    from pipelines.convert_cli import main as convert_main
    from pipelines.train_cli import main

    lines = [letor_line(i % 3, i // 3, [0.1 * i, 1.0, i % 2]) for i in range(9)]
    write_lines(env.tmp / "letor" / "train.txt", lines)
    data, run = env.tmp / "data", env.tmp / "run"
    argv = ["--input", str(env.tmp / "letor"), "--output", str(data), "--min-list-size", "4"]
    with contextlib.redirect_stdout(io.StringIO()):
        argv += ["--workers", "1", "--no-progress", "--log-level", "ERROR"]
        assert convert_main(argv) == 0
    argv = ["--model", "mlp", "--data", str(data), "--model-dir", str(run), "--quiet"]
    return _cli_error(main, argv, "tfr-train", env, [run])


def _eval(env: Env, damage) -> str:
    from pipelines.eval_cli import main

    model_dir, dataset = env.trained()
    data = env.tmp / "data"
    shutil.copytree(dataset, data)
    damage(data)
    metrics = Path(model_dir) / "metrics.json"
    before = metrics.read_bytes()
    message = _cli_error(main, ["--model-dir", model_dir, "--data", str(data)], "tfr-eval", env, [])
    assert metrics.read_bytes() == before  # nothing merged into metrics.json
    return message.replace(model_dir, "RUN")


def _predict(env: Env, input_path: Path) -> str:
    from pipelines.predict_cli import main

    out = env.tmp / "run.txt"
    argv = ["--model", env.servables["reject"], "--input", str(input_path)]
    message = _cli_error(
        main, argv + ["--output", str(out), "--no-progress"], "tfr-predict", env, [out]
    )
    return message


def _predict_into_missing_directory(env: Env) -> str:
    from pipelines.predict_cli import main

    source = write_lines(env.tmp / "q.txt", [letor_line(1, 1, [0.5] * 3)])
    out = env.tmp / "missing" / "run.txt"
    argv = ["--model", env.servables["reject"], "--input", source, "--output", str(out)]
    message = _cli_error(main, argv + ["--no-progress"], "tfr-predict", env, [])
    assert sorted(os.listdir(env.tmp)) == ["q.txt"]
    return message


def _predict_docid(env: Env) -> str:
    """A LETOR comment ``#docid = caf\\xe9`` (cp1252, not UTF-8)."""
    path = env.tmp / "q.txt"
    good = letor_line(1, 1, [0.5] * 3, "docid = d1").encode()
    path.write_bytes(good + b"0 qid:1 1:0.1 2:0.2 3:0.3 #docid = caf\xe9\n")
    return _predict(env, path)


def _elwc_file(env: Env, items: list[list[float] | None]) -> Path:
    """One ELWC record of the given items (``None``: no features field)."""
    from tensorflow_serving.apis import input_pb2

    good = input_pb2.ExampleListWithContext()
    good.context.features.feature["qid"].int64_list.value.append(1)
    good.examples.add().features.feature["features"].float_list.value.extend([0.1, 0.2, 0.3])
    bad = input_pb2.ExampleListWithContext()
    bad.context.features.feature["qid"].int64_list.value.append(2)
    for values in items:
        feature = bad.examples.add().features.feature
        if values is not None:
            feature["features"].float_list.value.extend(values)
    path = env.tmp / "lists.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(good.SerializeToString())
        writer.write(bad.SerializeToString())
    return path


def _predict_elwc(env: Env, items) -> str:
    return _predict(env, _elwc_file(env, items))


def _predict_cut_shard(env: Env) -> str:
    path = _elwc_file(env, [[1.0, 2.0, 3.0]])
    _damage(path, "cut")
    return _predict(env, path)


def _predict_gz(env: Env) -> str:
    gz = _gzip_lines()
    path = env.tmp / "q.txt.gz"
    path.write_bytes(gz[: len(gz) // 2])
    return _predict(env, path)


def _predict_manifest(env: Env) -> str:
    data = _tiny_converted(env)
    _broken_manifest(data, "cut")
    return _predict(env, data)


def _predict_short_line(env: Env) -> str:
    """A LETOR line stopping at feature 20 for the session's export of its model, whose
    training data gave all 136 features on every line."""
    from pipelines.predict_cli import main

    _, export = env.request.getfixturevalue("exported")
    lines = [letor_line(1, 1, [0.5] * 136), letor_line(0, 1, [0.5] * 20)]
    path = write_lines(env.tmp / "short.txt", lines)
    out = env.tmp / "run.txt"
    argv = ["--model", export, "--input", path, "--output", str(out), "--no-progress"]
    return _cli_error(main, argv, "tfr-predict", env, [out])


def _train_one_label(env: Env) -> str:
    """Train lists whose labels are all 0, kept by ``--include-empty-lists``."""
    from pipelines.convert_cli import main as convert_main
    from pipelines.train_cli import main

    for split in ("train", "vali", "test"):
        lines = [
            letor_line(0 if split == "train" else i % 3, i // 3, [0.1 * i, 1.0, i % 2])
            for i in range(9)
        ]
        write_lines(env.tmp / "letor" / f"{split}.txt", lines)
    data, run = env.tmp / "data", env.tmp / "run"
    argv = ["--input", str(env.tmp / "letor"), "--output", str(data), "--workers", "1"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert convert_main(argv + ["--no-progress", "--log-level", "ERROR"]) == 0
    argv = ["--model", "mlp", "--data", str(data), "--model-dir", str(run), "--quiet"]
    return _cli_error(main, argv + ["--include-empty-lists"], "tfr-train", env, [run])


def _train_past_learned_positions(env: Env) -> str:
    from pipelines.train_cli import main

    data, run = _tiny_converted(env), env.tmp / "run"
    argv = ["--model", "context_aware", "--data", str(data), "--model-dir", str(run), "--quiet"]
    argv += ["--positional-encoding", "learned", "--max-positions", "2", "--list-size", "2"]
    return _cli_error(main, argv, "tfr-train", env, [run])


def _predict_past_learned_positions(env: Env) -> str:
    """An untrained context_aware export whose learned positions take 3 items, given 5."""
    from pipelines.predict_cli import main
    from tests.conftest import SMALL, identity_manifest
    from tfr_rankformer.model.model_config import ModelConfig
    from tfr_rankformer.model.models import build_model
    from tfr_rankformer.serving.export import save_servable

    tf.keras.utils.set_random_seed(0)
    config = ModelConfig(**SMALL, d_fc=8, positional_encoding="learned", max_positions=3)
    model = build_model("context_aware", identity_manifest(3), config.resolved("context_aware"), 2)
    export = str(env.tmp / "export" / "1")
    save_servable(model, export, num_features=3, list_head=False, warmup=[], max_items=3)
    source = write_lines(env.tmp / "in.txt", [letor_line(0, 2, [i, 0, 1]) for i in range(5)])
    out = env.tmp / "out.trec"
    argv = ["--model", export, "--input", str(source), "--output", str(out), "--no-progress"]
    return _cli_error(main, argv, "tfr-predict", env, [out])


def _data_cases() -> list[Case]:
    cases = []
    for command, runner in (("tfr-train", _train), ("tfr-eval", _eval)):
        split = "train" if command == "tfr-train" else "test"
        for text, damage, key in (
            ("a TFRecord shard cut short", lambda d, s=split: _damage(_shard(d, s), "cut"), "cut"),
            (
                "a TFRecord shard cut at a record boundary",
                lambda d, s=split: _damage(_shard(d, s), "record"),
                "record",
            ),
            (
                "a TFRecord shard with a corrupt byte",
                lambda d, s=split: _damage(_shard(d, s), "flip"),
                "flip",
            ),
            ("a missing TFRecord shard", lambda d, s=split: _shard(d, s).unlink(), "missing"),
            ("a manifest.json cut short", lambda d: _broken_manifest(d, "cut"), "manifest"),
            ("a manifest.json without `splits`", lambda d: _broken_manifest(d, "key"), "splits"),
        ):
            cases.append(
                Case(command, text, lambda env, r=runner, g=damage: r(env, g), f"{command}-{key}")
            )
    cases += [
        Case(
            "tfr-train",
            "`--overwrite` of a `--model-dir` that holds files a run never writes",
            _train_into_foreign,
            "train-foreign-dir",
        ),
        Case(
            "tfr-train",
            "a dataset whose train split `tfr-convert --min-list-size` left without lists",
            _train_empty_split,
            "train-empty-split",
        ),
        Case(
            "tfr-train",
            "a train split whose labels are all 0 (kept by `--include-empty-lists`)",
            _train_one_label,
            "train-one-label",
        ),
        Case(
            "tfr-train",
            "`--positional-encoding learned --max-positions 2` on lists of 3 items",
            _train_past_learned_positions,
            "train-learned-positions",
        ),
        Case(
            "tfr-predict",
            "a list of 5 items to an export trained with `--max-positions 3`",
            _predict_past_learned_positions,
            "predict-learned-positions",
        ),
        Case(
            "tfr-predict",
            "`--output` in a directory that does not exist",
            _predict_into_missing_directory,
            "predict-output-dir",
        ),
        Case(
            "tfr-predict",
            "a LETOR `#docid = ...` comment that is not UTF-8 (cp1252 `caf\\xe9`)",
            _predict_docid,
            "predict-docid",
        ),
        Case("tfr-predict", "a truncated LETOR `.gz`", _predict_gz, "predict-gz"),
        Case("tfr-predict", "an ELWC `.tfrecord` cut short", _predict_cut_shard, "predict-cut"),
        Case(
            "tfr-predict",
            "a converted directory whose manifest.json is cut short",
            _predict_manifest,
            "predict-manifest",
        ),
        Case(
            "tfr-predict",
            "an ELWC item without `features`",
            lambda env: _predict_elwc(env, [[1.0, 2.0, 3.0], None]),
            "predict-missing",
        ),
        Case(
            "tfr-predict",
            "an ELWC item with 2 of 3 features",
            lambda env: _predict_elwc(env, [[1.0, 2.0]]),
            "predict-short",
        ),
        Case(
            "tfr-predict",
            "an ELWC item holding NaN",
            lambda env: _predict_elwc(env, [[1.0, float("nan"), 3.0]]),
            "predict-nan",
        ),
        Case(
            "tfr-predict",
            "a LETOR line stopping at feature 20 of 136, the training data dense",
            _predict_short_line,
            "predict-short-line",
        ),
    ]
    return cases


# ---------------------------------------------------------------------------
# Settings files and I/O failures (a full disk, a read-only or forbidden directory),
# simulated where the write happens: a fault point, or the write itself raising.
# ---------------------------------------------------------------------------


def _train_with_config(env: Env, text: str) -> str:
    from pipelines.train_cli import main

    data, config = _tiny_converted(env), env.tmp / "settings.json"
    config.write_text(text)
    run = env.tmp / "run"
    argv = ["--model", "mlp", "--data", str(data), "--model-dir", str(run), "--quiet"]
    return _cli_error(main, argv + ["--config", str(config)], "tfr-train", env, [run])


def _convert_with_config(env: Env, text: str) -> str:
    from pipelines.convert_cli import main

    config = env.tmp / "settings.json"
    config.write_text(text)
    out = env.tmp / "out"
    argv = ["--input", "synthetic", "--output", str(out), "--config", str(config)]
    return _cli_error(main, argv + ["--no-progress"], "tfr-convert", env, [out])


def _failing_at(point: str, error: Exception):
    """``fault_points.reached`` raising ``error`` at ``point``."""
    from tfr_rankformer.core import fault_points

    def reached(name: str) -> None:
        if name == point:
            raise error

    return mock.patch.object(fault_points, "reached", reached)


_NO_SPACE = (errno.ENOSPC, "No space left on device")
_RUNS: dict[str, Path] = {}


def _train_argv(env: Env, run: Path) -> list[str]:
    data = _tiny_converted(env)
    return ["--model", "mlp", "--data", str(data), "--model-dir", str(run), "--epochs", "1"]


def _train_disk_full(env: Env) -> str:
    """TensorFlow's checkpoint write finds the disk full; ``--resume`` then finishes."""
    from pipelines.train_cli import main

    run = env.tmp / "run"
    argv = _train_argv(env, run) + ["--quiet", "--no-export"]
    full = tf.errors.ResourceExhaustedError(
        None, None, f"{run}/checkpoints/best_temp/part-0.tempstate1; No space left on device"
    )
    with _failing_at("train.checkpoint", full):
        message = _cli_error(main, argv, "tfr-train", env, [])
    assert not list(run.rglob("*.partial")) and not (run / "metrics.json").exists()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv + ["--resume"]) == 0
    assert (run / "metrics.json").exists()
    _RUNS.setdefault("run", run)  # a complete run for _export_read_only
    return message


def _train_forbidden(env: Env) -> str:
    """``--model-dir`` in a directory where no file may be created."""
    from pipelines.train_cli import main
    from tfr_rankformer.core import atomic_files

    def refuse(file, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", file)

    run = env.tmp / "run"
    with mock.patch.object(atomic_files, "open", refuse, create=True):
        message = _cli_error(main, _train_argv(env, run) + ["--quiet"], "tfr-train", env, [])
    assert not list(run.rglob("*")), list(run.rglob("*"))
    return message


def _convert_disk_full(env: Env) -> str:
    from pipelines.convert_cli import main

    out = env.tmp / "out"
    argv = ["--input", "synthetic", "--synthetic-lists", "3", "--output", str(out)]
    with _failing_at("convert.shard", OSError(*_NO_SPACE)):
        message = _cli_error(main, argv + ["--no-progress"], "tfr-convert", env, [out])
    assert os.listdir(env.tmp) == [], os.listdir(env.tmp)
    return message


def _predict_disk_full(env: Env) -> str:
    from tfr_rankformer.serving import prediction

    def write_results(lists, out, **options):
        out.write("1 Q0 d1 1 0.5 tfr\n")
        raise OSError(*_NO_SPACE)

    source = write_lines(env.tmp / "q.txt", [letor_line(1, 1, [0.5] * 3)])
    with mock.patch.object(prediction, "write_results", write_results):
        return _predict(env, Path(source))


def _predict_empty_file(env: Env) -> str:
    (env.tmp / "q.txt").write_bytes(b"")
    return _predict(env, env.tmp / "q.txt")


def _export_read_only(env: Env) -> str:
    """The SavedModel's write fails as on a read-only run directory."""
    from pipelines.export_cli import main
    from pipelines.train_cli import main as train_main

    if "run" not in _RUNS:
        run = env.request.getfixturevalue("tmp_path_factory").mktemp("tiny-run") / "run"
        with contextlib.redirect_stdout(io.StringIO()):
            assert train_main(_train_argv(env, run) + ["--quiet", "--no-export"]) == 0
        _RUNS["run"] = run
    run = env.tmp / "run"
    shutil.copytree(_RUNS["run"], run)
    denied = tf.errors.PermissionDeniedError(
        None, None, f"{run}/export/1.partial/variables; Read-only file system"
    )
    with _failing_at("export.saved", denied):
        message = _cli_error(main, ["--model-dir", str(run)], "tfr-export", env, [])
    assert os.listdir(run / "export") == []
    return message


def _settings_and_io_cases() -> list[Case]:
    files = [
        ("a JSON list", "[1, 2]", "list"),
        ("invalid JSON", '{"epochs": 1,\n "dropout": }', "json"),
        ('`"learning_rate": "0.01"` (a string)', '{"learning_rate": "0.01"}', "type"),
        ("an unknown field", '{"epochs": 1, "learning_rat": 0.01}', "unknown"),
    ]
    cases = [
        Case(
            "tfr-train",
            f"a `--config` file holding {text}",
            lambda e, t=t: _train_with_config(e, t),
            f"config-{key}",
        )
        for text, t, key in files
    ]
    return cases + [
        Case(
            "tfr-convert",
            'a `--config` file holding `"seed": "1"` (a string)',
            lambda env: _convert_with_config(env, '{"seed": "1"}'),
            "convert-config-type",
        ),
        Case(
            "tfr-train",
            "a full disk under `--model-dir` (a checkpoint write)",
            _train_disk_full,
            "train-disk-full",
        ),
        Case(
            "tfr-train",
            "`--model-dir` where no file may be created",
            _train_forbidden,
            "train-forbidden",
        ),
        Case(
            "tfr-convert", "a full disk under `--output`", _convert_disk_full, "convert-disk-full"
        ),
        Case(
            "tfr-predict", "a full disk under `--output`", _predict_disk_full, "predict-disk-full"
        ),
        Case("tfr-predict", "an empty LETOR file", _predict_empty_file, "predict-empty"),
        Case("tfr-export", "a read-only run directory", _export_read_only, "export-read-only"),
    ]


# ---------------------------------------------------------------------------
# The serving signatures, as a client calls them.
# ---------------------------------------------------------------------------


def _elwc(items) -> bytes:
    from tensorflow_serving.apis import input_pb2

    elwc = input_pb2.ExampleListWithContext()
    for values in items:
        feature = elwc.examples.add().features.feature
        if isinstance(values, tuple):  # int64 values
            feature["features"].int64_list.value.extend(values)
        elif values is not None:
            feature["features"].float_list.value.extend(values)
    return elwc.SerializeToString()


_LOADED: dict = {}


def _signatures(path: str):
    if path not in _LOADED:
        _LOADED[path] = tf.saved_model.load(path).signatures
    return _LOADED[path]


def _serve(env: Env, items) -> str:
    from tfr_rankformer.serving.serving_requests import SIGNATURE_ELWC

    signature = _signatures(env.servables["reject"])[SIGNATURE_ELWC]
    request = tf.constant([_elwc([[0.1, 0.2, 0.3]]), _elwc(items)])
    return _signature_error(lambda: signature(examples=request))


def _tensors(env: Env, features: np.ndarray, mask: np.ndarray) -> str:
    from tfr_rankformer.serving.serving_requests import SIGNATURE_TENSORS

    signature = _signatures(env.servables["reject"])[SIGNATURE_TENSORS]
    inputs = {"features": tf.constant(features, tf.float32), "mask": tf.constant(mask)}
    return _signature_error(lambda: signature(**inputs))


def _serving_cases() -> list[Case]:
    ok = [0.1, 0.2, 0.3]
    elwc = [
        ("an item without `features`", [ok, ok, None], "missing"),
        ("an item with 46 values for 3 features", [ok, [0.5] * 46], "long"),
        ("an item with 2 values for 3 features", [[0.5] * 2], "short"),
        ("an item holding NaN", [ok, [0.5, float("nan"), 0.5]], "nan"),
        ("an item holding -inf", [[float("-inf"), 0.5, 0.5]], "inf"),
        ("`features` as an int64 list", [(1, 2, 3)], "int64"),
    ]
    nan = np.ones((1, 2, 3))
    nan[0, 1, 2] = np.nan
    tensors = [
        ("features of 46 values per item", np.ones((1, 2, 46)), np.ones((1, 2), bool), "width"),
        ("a mask of another shape", np.ones((1, 2, 3)), np.ones((1, 3), bool), "mask"),
        ("a valid item holding NaN", nan, np.ones((1, 2), bool), "nan"),
    ]
    return [
        Case("serving_default", text, lambda env, i=items: _serve(env, i), f"serve-{key}")
        for text, items, key in elwc
    ] + [
        Case("predict_tensors", text, lambda env, f=f, m=m: _tensors(env, f, m), f"tensors-{key}")
        for text, f, m, key in tensors
    ]


CASES = _convert_cases() + _data_cases() + _settings_and_io_cases() + _serving_cases()


@pytest.fixture
def env(tmp_path, tiny_servables, request) -> Env:
    return Env(tmp_path, tiny_servables, request)


# Messages of the cases run so far, for the table (the last test) to reuse.
_MESSAGES: dict[str, str] = {}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rejected_input(env, case):
    message = case.run(env)
    _MESSAGES[case.id] = message
    if case.command.startswith("tfr-"):
        assert "DIR/" in message or "RUN" in message, message  # the file is named
    else:
        assert "features" in message or "mask" in message, message


# ---------------------------------------------------------------------------
# The table.
# ---------------------------------------------------------------------------

_HEADER = """# Rejected inputs

Every input the commands and the serving signatures refuse, with the message
each gives. `DIR/` stands for the directory of the input and `RUN` for the run
directory. Commands exit with status 1 after this one line on stderr (status 2,
after the usage lines, for a bad option) and leave no partial output. An I/O
failure (a full disk, a read-only or forbidden directory) names the path and the
option that gave it, and a training run it stopped continues with `--resume`. An
error of any other kind is one line too, naming its kind; only `--verbose` shows
a Python traceback. The signatures fail the request with `INVALID_ARGUMENT` and
this message (TF Serving passes it to the client), unless the model was exported
with `tfr-export --invalid-items score-last` (see [tfr-export.md](tfr-export.md)).

Generated from the cases in `tests/test_rejected_inputs.py`; `make
docs-rejected` rewrites it, and the test suite fails when it is out of date.

| command | input | message |
|---|---|---|
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def render(rows: list[tuple[str, str, str]]) -> str:
    body = "".join(f"| {c} | {_cell(i)} | {_code(_cell(m))} |\n" for c, i, m in rows)
    return _HEADER + body


def test_the_docs_table_lists_every_rejected_input_with_its_current_message(
    tmp_path, tiny_servables, request
):
    rows = []
    for number, case in enumerate(CASES):
        if case.id not in _MESSAGES:  # not run above (e.g. under -k)
            case_dir = tmp_path / str(number)
            case_dir.mkdir()
            _MESSAGES[case.id] = case.run(Env(case_dir, tiny_servables, request))
        rows.append((case.command, case.input, _MESSAGES[case.id]))
    text = render(rows)
    if os.environ.get(REWRITE_ENV):
        DOC.parent.mkdir(exist_ok=True)
        DOC.write_text(text, encoding="utf-8")
    committed = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
    assert committed == text, f"{DOC} is out of date: run `make docs-rejected`"
