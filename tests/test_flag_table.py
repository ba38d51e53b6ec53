"""The flag table: each shared option declared once, its stated default the configuration's."""

from __future__ import annotations

import argparse
import ast
import collections
import pathlib
import re

import pytest

from pipelines.flag_table import FLAGS, Flag, add_flag, add_flags, source_default

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Flag strings two commands declare on their own because the option means
# something else in each: tfr-train's --xla is auto/on/off for the whole run,
# train_bench's a switch compiling only its timed step.
OWN_MEANING = {"--xla"}
# Scripts the authors' released code's Python runs (torch, no project packages):
# they cannot import the table and declare their options themselves.
RELEASED_SIDE = ("reference_step_timer.py", "reference_runner_options.py")


def declared_flags(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """Flag string -> the source files with an ``add_argument("--flag", ...)`` of it."""
    where = collections.defaultdict(set)
    for package in ("pipelines", "tfrecords_tools"):
        for path in (root / package).rglob("*.py"):
            if path.name in RELEASED_SIDE:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                    for arg in node.args:
                        if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                            where[arg.value].add(str(path.relative_to(root)))
    return where


def test_a_flag_is_declared_in_one_file():
    repeated = {
        flag: sorted(files)
        for flag, files in declared_flags().items()
        if len(files) > 1 and flag not in OWN_MEANING
    }
    assert repeated == {}


def test_table_flags_are_declared_nowhere_else():
    table = {name for flag in FLAGS.values() for name in flag.names}
    assert not table & set(declared_flags())


def test_scan_finds_a_repeated_flag(tmp_path):
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "tfrecords_tools").mkdir()
    for name in ("a.py", "b.py"):
        (tmp_path / "pipelines" / name).write_text('p.add_argument(\n    "--twice", type=int)\n')
    assert declared_flags(tmp_path) == {"--twice": {"pipelines/a.py", "pipelines/b.py"}}


def stated_default(flag: Flag) -> str:
    """The first value after ``Default:`` in a help text."""
    match = re.search(r"Default: (?:at most |each model's \()?([\w.,-]+?)[;,)( ]", flag.help + " ")
    assert match, flag.help
    return match.group(1).replace(",", "")


@pytest.mark.parametrize("key", sorted(k for k, f in FLAGS.items() if f.stated_default is not None))
def test_help_states_the_configuration_default(key):
    flag = FLAGS[key]
    value = flag.stated_default
    assert stated_default(flag) == (f"{value:g}" if isinstance(value, float) else str(value))


def test_stated_defaults_are_the_training_configs():
    from tfr_rankformer.training.text_config import TextConfig
    from tfr_rankformer.training.train_config import TrainConfig

    resolved = TrainConfig(model="rankformer", data="d", model_dir="m")
    assert FLAGS["epochs"].stated_default == resolved.epochs
    assert FLAGS["batch_size"].stated_default == resolved.batch_size
    assert FLAGS["patience"].stated_default == resolved.patience
    assert FLAGS["eval_batch_size"].stated_default == resolved.eval_batch_size
    assert FLAGS["batch_items"].stated_default == resolved.batch_items
    assert FLAGS["model"].stated_default == TrainConfig.__dataclass_fields__["model"].default
    assert FLAGS["seed"].stated_default == resolved.seed
    for field in ("seed", "adam_epsilon", "model"):
        assert source_default("tfr_rankformer.training.train_config", "TrainConfig", field) == (
            TrainConfig.__dataclass_fields__[field].default
        )
    for field in ("max_query_tokens", "max_document_tokens"):
        assert FLAGS[field].stated_default == TextConfig.__dataclass_fields__[field].default


def test_source_default_refuses_an_unknown_field():
    with pytest.raises(LookupError, match="no_such_field"):
        source_default("tfr_rankformer.training.train_config", "TrainConfig", "no_such_field")


# Table options that fill a TrainConfig field of the same name, with a value to give.
TRAIN_FIELDS = {
    "epochs": "3",
    "batch_size": "8",
    "list_size": "5",
    "patience": "2",
    "seed": "7",
    "adam_epsilon": "keras",
    "model": "mlp",
    "max_query_tokens": "9",
    "max_document_tokens": "11",
}


@pytest.mark.parametrize("key", sorted(TRAIN_FIELDS))
def test_option_round_trips_into_train_config(key):
    from tfr_rankformer.training.train_config import TrainConfig

    parser = argparse.ArgumentParser()
    add_flags(parser, key)
    args = parser.parse_args([FLAGS[key].names[0], TRAIN_FIELDS[key]])
    settings = {"model": "rankformer", "data": "d", "model_dir": "m"}
    if key.startswith("max_"):
        settings["model"] = "listformer"
    settings.update({k: v for k, v in vars(args).items() if v is not None})
    config = TrainConfig.from_flat(settings)
    filled = getattr(config.text, key) if key.startswith("max_") else getattr(config, key)
    assert str(filled) == TRAIN_FIELDS[key]


def test_overrides_replace_the_table_keywords():
    parser = argparse.ArgumentParser()
    add_flag(parser, "seed", default=5, help="the seed")
    add_flags(parser, "epochs", overrides={"epochs": {"required": True}})
    (seed,) = [a for a in parser._actions if a.dest == "seed"]
    assert (seed.default, seed.help, seed.type) == (5, "the seed", int)
    with pytest.raises(SystemExit):
        parser.parse_args([])


def test_unknown_key_is_refused():
    with pytest.raises(KeyError):
        add_flags(argparse.ArgumentParser(), "no_such_option")


@pytest.mark.parametrize("script", RELEASED_SIDE[:1] + ("reference_runner.py",))
def test_the_released_code_side_starts_without_the_project(script, tmp_path):
    # As the released code's environment runs them: no site-packages, no PYTHONPATH,
    # another directory.
    import subprocess
    import sys

    path = ROOT / "pipelines" / "benchmarks" / "reference" / script
    done = subprocess.run(
        [sys.executable, "-S", "-E", str(path), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
