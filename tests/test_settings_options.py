"""Options generated from the settings' fields: each fills its field, states its default,
and a ``--config`` file is checked field by field."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import re
import subprocess
import sys

import pytest

from pipelines.train_cli import build_parser, main
from tfr_rankformer.core.config_io import add_options, from_args, given, on_off, setting
from tfr_rankformer.training.train_config import TrainConfig

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _help(parser: argparse.ArgumentParser, flag: str) -> str:
    (action,) = [a for a in parser._actions if flag in a.option_strings]
    return action.help


def _stated(text: str) -> str:
    match = re.search(r"Default: (?:at most )?([\w.-]+)", text)
    assert match, text
    return match.group(1)


@pytest.mark.parametrize(
    "model, flags",
    [
        ("rankformer", ("epochs", "batch_size", "batch_items", "patience", "eval_batch_size")),
        ("context_aware", ()),
    ],
)
def test_help_states_the_defaults_a_run_resolves(model, flags):
    parser = build_parser()
    config = TrainConfig(model=model, data="d", model_dir="m")
    for name in flags + ("seed", "adam_epsilon", "keep_weights"):
        text = _help(parser, "--" + name.replace("_", "-"))
        assert _stated(text) == str(getattr(config, name)), name
    if model == "context_aware":
        text = _help(parser, "--epochs")
        assert f"context_aware: {config.epochs} " in text
        assert f"context_aware: {config.batch_size} " in _help(parser, "--batch-size")


def test_text_defaults_are_stated():
    from tfr_rankformer.training.text_config import TextConfig

    parser = build_parser()
    for name in ("max_query_tokens", "max_document_tokens", "vocab_size"):
        text = _help(parser, "--" + name.replace("_", "-"))
        assert _stated(text) == str(getattr(TextConfig(), name))


TRAIN_FLAGS = {
    "--epochs": ("epochs", "3", 3),
    "--list-size": ("list_size", "5", 5),
    "--seed": ("seed", "7", 7),
    "--adam-epsilon": ("adam_epsilon", "keras", "keras"),
    "--lists-in-memory": ("lists_in_memory", "on", True),
    "--length-buckets": ("length_buckets", "off", False),
    "--exclude-empty-lists": ("include_empty_lists", None, False),
    "--evaluate-splits": ("evaluate_splits", "test,vali", ("test", "vali")),
    "--dropout": ("architecture.dropout", "0.1", 0.1),
    "--no-copied-layers": ("architecture.copied_layers", None, False),
}


@pytest.mark.parametrize("flag", sorted(TRAIN_FLAGS))
def test_an_option_fills_its_field(flag):
    from tfr_rankformer.model.model_config import ModelConfig

    name, value, expected = TRAIN_FLAGS[flag]
    args = build_parser().parse_args([flag] + ([value] if value is not None else []))
    settings = {**given(args, TrainConfig), **given(args, ModelConfig)}
    base = {"model": "mlp", "data": "d", "model_dir": "m", "batch_size": 8}
    config = TrainConfig.from_flat({**base, **settings})
    section, _, field = name.rpartition(".")
    assert getattr(getattr(config, section) if section else config, field) == expected


def test_a_config_file_of_the_wrong_type_names_file_and_field(tmp_path, capsys):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"learning_rate": "0.01", "dropout": 0.1}))
    assert main(["--config", str(path), "--data", "d", "--model-dir", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert (
        err == f"tfr-train: error: {path}: `learning_rate` must be a number or null, got '0.01'\n"
    )
    path.write_text(json.dumps({"architecture": {"num_layers": 2.5}}))
    assert main(["--config", str(path), "--data", "d", "--model-dir", str(tmp_path / "m")]) == 1
    assert "`num_layers` must be an int or null, got 2.5" in capsys.readouterr().err


def test_convert_checks_its_config_file_too(tmp_path, capsys):
    from pipelines.convert_cli import main as convert

    path = tmp_path / "convert.json"
    path.write_text(json.dumps({"shards": "2", "clicks": {"kappa": "high"}}))
    args = ["--input", "synthetic", "--output", str(tmp_path / "out"), "--config", str(path)]
    assert convert(args) == 1
    assert f"{path}: `shards` must be an int, got '2'" in capsys.readouterr().err
    path.write_text(json.dumps({"clicks": {"kappa": "high"}}))
    assert convert(args) == 1
    assert f"{path}: `kappa` must be a number, got 'high'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_generator_keeps_names_defaults_and_help():
    @dataclasses.dataclass(frozen=True)
    class Demo:
        list_size: int = setting(4, "items per list")
        init_from: str | None = setting(None, "a checkpoint", flag="--start", metavar="DIR")
        xla: bool | None = setting(None, "XLA. Default: auto", type=on_off)
        hidden: int = 0

    parser = argparse.ArgumentParser()
    add_options(parser, Demo)
    assert _help(parser, "--list-size") == "items per list. Default: 4"
    assert not [a for a in parser._actions if "--hidden" in a.option_strings]
    args = parser.parse_args(["--start", "ckpt", "--xla", "off"])
    assert given(args, Demo) == {"init_from": "ckpt", "xla": False}
    assert from_args(args, Demo) == Demo(init_from="ckpt", xla=False)
    with pytest.raises(SystemExit):
        parser.parse_args(["--xla", "maybe"])


RELEASED_SIDE = ("reference_runner.py",)


@pytest.mark.parametrize("script", RELEASED_SIDE)
def test_the_released_code_side_starts_without_the_project(script, tmp_path):
    # As the released code's environment runs them: no site-packages, no PYTHONPATH,
    # another directory.
    path = ROOT / "pipelines" / "benchmarks" / "reference" / script
    done = subprocess.run(
        [sys.executable, "-S", "-E", str(path), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
