"""``--overwrite`` replaces only tfr-convert's own output, and output failures name ``--output``.

The rule, the swap and the error messages are ``tfrecords_tools.atomic_output``'s.
Permission failures are simulated (the tests may run as root, for whom ``chmod`` denies nothing).
"""

from __future__ import annotations

import errno
import json
import os
import tempfile

import pytest

from pipelines.convert_cli import main
from tfrecords_tools.atomic_output import (
    ForeignOutputError,
    MountPointError,
    OutputError,
    foreign_entries,
    foreign_entries_of,
    manifest_is_ours,
    scratch_directory,
)

OURS = json.dumps({"created_by": "tfr-convert 0.1.0", "num_features": 3})
SHARD = "train-00000-of-00001.tfrecord"


def _converted(directory, *, manifest: str = OURS, extra: tuple[str, ...] = ()) -> None:
    os.makedirs(os.path.join(directory, "source"), exist_ok=True)
    for name, text in (("manifest.json", manifest), (SHARD, "old"), ("source/train.txt", "")):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write(text)
    for name in extra:
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write("mine")


def _hidden(directory) -> list[str]:
    return [n for n in os.listdir(directory) if ".partial-" in n or ".replaced-" in n]


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main([*argv, "--no-progress", "--log-level", "ERROR"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


# === The rule ===


@pytest.mark.parametrize(
    "paths, foreign",
    [
        ([], []),
        (["manifest.json", SHARD, "vali-00003-of-00004.tfrecord", "source/"], []),
        (["manifest.json", "source/Fold1/train.txt"], []),  # a remote listing, not collapsed
        (["Fold1/manifest.json", "Fold1/" + SHARD, "Fold2/manifest.json"], []),
        (["manifest.json", SHARD, "notes.txt"], ["notes.txt"]),
        (["manifest.json", "train.tfrecord", "raw/"], ["raw/", "train.tfrecord"]),
        ([SHARD], [SHARD]),  # no manifest
        (["Fold1/manifest.json", "Fold1/x.csv", "Fold2/"], ["Fold1/x.csv", "Fold2/"]),
        (["Fold1/train.txt", "Fold1/test.txt", "S1.txt"], ["Fold1/", "S1.txt"]),  # LETOR data
        (["manifest.json", "Fold1/manifest.json"], ["Fold1/"]),
    ],
)
def test_the_rule_on_listings(paths, foreign):
    assert foreign_entries_of(paths, lambda path: True) == foreign


def test_a_manifest_from_elsewhere_makes_the_directory_foreign():
    listing = ["manifest.json", SHARD]
    assert foreign_entries_of(listing, lambda path: False) == ["manifest.json", SHARD]
    assert not manifest_is_ours('{"created_by": "someone else"}')
    assert not manifest_is_ours("[1, 2]")
    assert manifest_is_ours('{"created_by": "tfr-convert 0.1.0", "splits": {')  # damaged, ours


def test_local_directories(tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _converted(ours)
    _converted(theirs, manifest=json.dumps({"created_by": "other-tool 2"}))
    os.makedirs(tmp_path / "empty")
    assert foreign_entries(ours) == foreign_entries(tmp_path / "empty") == []
    assert foreign_entries(theirs) == ["manifest.json", "source/", SHARD]
    (ours / "notes").mkdir()
    assert foreign_entries(ours) == ["notes/"]


# === Replacing an output ===


def test_overwrite_replaces_a_converted_directory_and_leaves_nothing_hidden(tmp_path):
    out = tmp_path / "out"
    _converted(out)
    with pytest.raises(FileExistsError, match="already exists; pass --overwrite"):
        with scratch_directory(str(out), overwrite=False):
            pass
    with scratch_directory(str(out), overwrite=True) as scratch:
        with open(os.path.join(scratch, "manifest.json"), "w", encoding="utf-8") as f:
            f.write(OURS)
    assert os.listdir(out) == ["manifest.json"] and _hidden(tmp_path) == []


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_foreign_directory_is_refused_and_kept(tmp_path, monkeypatch, overwrite):
    monkeypatch.chdir(tmp_path)
    _converted(tmp_path / "out", extra=tuple(f"mine{i}.txt" for i in range(7)))
    with pytest.raises(ForeignOutputError) as info:
        with scratch_directory("out", overwrite=overwrite):
            pytest.fail("the conversion must not start")
    message = str(info.value)
    assert message.startswith("out was not written by tfr-convert: it holds ")
    assert "mine0.txt, mine1.txt, mine2.txt, mine3.txt, mine4.txt and 2 more;" in message
    assert len(os.listdir("out")) == 10 and _hidden(".") == []


def test_a_file_is_refused_and_kept(tmp_path):
    path = tmp_path / "out"
    path.write_text("mine")
    with pytest.raises(ForeignOutputError, match="is a file, not a directory written by"):
        with scratch_directory(str(path), overwrite=True):
            pass
    assert path.read_text() == "mine"


def test_an_empty_directory_is_used_without_overwrite(tmp_path):
    (tmp_path / "out").mkdir()
    with scratch_directory(str(tmp_path / "out"), overwrite=False) as scratch:
        open(os.path.join(scratch, "manifest.json"), "w").close()
    assert os.listdir(tmp_path / "out") == ["manifest.json"]


def test_a_file_added_during_the_conversion_stops_the_swap(tmp_path):
    out = tmp_path / "out"
    _converted(out)
    with pytest.raises(ForeignOutputError, match="it holds added.txt"):
        with scratch_directory(str(out), overwrite=True):
            (out / "added.txt").write_text("mine")
    assert (out / "added.txt").read_text() == "mine" and (out / SHARD).read_text() == "old"
    assert _hidden(tmp_path) == []


def test_a_failed_swap_puts_the_old_output_back(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _converted(out)
    rename = os.rename

    def failing_rename(src, dst):
        if ".partial-" in str(src):
            raise OSError(errno.EXDEV, "Invalid cross-device link", src, None, dst)
        rename(src, dst)

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OutputError) as info:
        with scratch_directory(str(out), overwrite=True):
            pass
    assert (
        str(info.value)
        == f"{out}: cannot move the new output into place: Invalid cross-device link"
    )
    assert (out / SHARD).read_text() == "old" and _hidden(tmp_path) == []


# === Failures name --output ===


def test_an_unwritable_parent_names_the_output(tmp_path, monkeypatch, capsys):
    def denied(prefix="", dir=None, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, prefix + "x1"))

    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    monkeypatch.chdir(tmp_path)
    code, err = _run(["--input", "synthetic", "--synthetic-lists", "3", "--output", "out"], capsys)
    assert code == 1
    assert err == (
        "tfr-convert: error: --output out: cannot create the output directory: Permission denied\n"
    )


def test_an_uncreatable_parent_names_the_output_and_the_parent(tmp_path, monkeypatch, capsys):
    def denied(path, exist_ok=False):
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(os, "makedirs", denied)
    out = str(tmp_path / "ro" / "out")
    code, err = _run(["--input", "synthetic", "--output", out], capsys)
    assert code == 1 and err == (
        f"tfr-convert: error: --output {out}: cannot create the output directory: "
        "Permission denied "
        f"({tmp_path / 'ro'})\n"
    )


def test_text_conversion_names_the_output_too(tmp_path, monkeypatch, capsys):
    def denied(prefix="", dir=None, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, prefix + "x1"))

    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    out = str(tmp_path / "text")
    code, err = _run(["--input", "synthetic-text", "--output", out], capsys)
    assert code == 1
    assert (
        err == f"tfr-convert: error: {out}: cannot create the output directory: Permission denied\n"
    )


def test_a_full_disk_names_the_output_and_the_file(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(OutputError) as info:
        with scratch_directory(str(out), overwrite=False) as scratch:
            path = os.path.join(scratch, SHARD)
            raise OSError(errno.ENOSPC, "No space left on device", path)
    assert str(info.value) == f"{out}: cannot write {SHARD}: No space left on device"
    assert not out.exists() and _hidden(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_a_read_only_parent_names_the_output(tmp_path, capsys):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        code, err = _run(["--input", "synthetic", "--output", str(parent / "out")], capsys)
    finally:
        parent.chmod(0o755)
    assert code == 1 and err.startswith(f"tfr-convert: error: {parent / 'out'}: cannot create")


def _mount_point_at(monkeypatch, path) -> None:
    """Makes ``os.path.ismount`` answer True for ``path`` (no real mount needed)."""
    ismount = os.path.ismount
    target = os.path.abspath(path)
    monkeypatch.setattr(os.path, "ismount", lambda p: os.path.abspath(p) == target or ismount(p))


def test_a_mount_point_is_refused_before_the_work_starts(tmp_path, monkeypatch):
    out = tmp_path / "mnt"
    out.mkdir()
    _mount_point_at(monkeypatch, out)
    for overwrite in (False, True):
        with pytest.raises(MountPointError) as info:
            with scratch_directory(str(out), overwrite=overwrite):
                pytest.fail("the conversion must not start")
        assert str(info.value) == (
            f"--output {out} is a mount point: it cannot be replaced by a rename; "
            f"give a directory inside it, e.g. {out / 'data'}"
        )
    assert os.listdir(out) == [] and sorted(os.listdir(tmp_path)) == ["mnt"]
    # A directory inside it is a plain output.
    with scratch_directory(str(out / "data"), overwrite=False) as scratch:
        open(os.path.join(scratch, "manifest.json"), "w").close()
    assert os.listdir(out / "data") == ["manifest.json"]


def test_the_cli_refuses_a_mount_point_for_every_input_kind(tmp_path, monkeypatch, capsys):
    out = tmp_path / "mnt"
    out.mkdir()
    _mount_point_at(monkeypatch, out)
    for argv in (["--input", "synthetic"], ["--input", "synthetic-text"]):
        code, err = _run([*argv, "--synthetic-lists", "3", "--output", str(out)], capsys)
        assert code == 1 and err == (
            f"tfr-convert: error: --output {out} is a mount point: it cannot be replaced by "
            f"a rename; give a directory inside it, e.g. {out}/data\n"
        )
    assert os.listdir(out) == [] and sorted(os.listdir(tmp_path)) == ["mnt"]


# === Every writer follows the rule ===


def test_the_cli_refuses_a_foreign_directory_for_every_input_kind(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    for argv in (["--input", "synthetic"], ["--input", "synthetic-text"]):
        code, err = _run(
            [*argv, "--synthetic-lists", "3", "--output", str(out), "--overwrite"], capsys
        )
        assert code == 1 and f"{out} was not written by tfr-convert: it holds notes.txt" in err
    assert os.listdir(out) == ["notes.txt"] and _hidden(tmp_path) == []


def test_the_cli_replaces_its_own_folds(tmp_path, capsys):
    data = tmp_path / "letor"
    for fold in (1, 2):
        lines = "".join(f"{i % 3} qid:{i // 3} 1:0.{i} 2:1 3:{i}\n" for i in range(9))
        for split in ("train", "vali", "test"):
            os.makedirs(data / f"Fold{fold}", exist_ok=True)
            (data / f"Fold{fold}" / f"{split}.txt").write_text(lines)
    argv = ["--input", str(data), "--folds", "all", "--output", str(tmp_path / "out")]
    assert _run(argv, capsys)[0] == 0
    assert sorted(os.listdir(tmp_path / "out")) == ["Fold1", "Fold2"]
    assert _run(argv + ["--overwrite"], capsys)[0] == 0
    (tmp_path / "out" / "Fold2" / "notes.txt").write_text("mine")
    code, err = _run(argv + ["--overwrite"], capsys)
    assert code == 1 and "it holds Fold2/notes.txt;" in err
    assert (tmp_path / "out" / "Fold2" / "notes.txt").exists()


def test_beam_remote_outputs_follow_the_rule(tmp_path):
    from tfrecords_tools.beam.beam_convert import prepare_remote

    out = tmp_path / "out"
    _converted(out, extra=("notes.txt",))
    with pytest.raises(ForeignOutputError, match="it holds notes.txt;"):
        prepare_remote(str(out), overwrite=True)
    os.remove(out / "notes.txt")
    with pytest.raises(FileExistsError, match="pass --overwrite"):
        prepare_remote(str(out), overwrite=False)
    assert prepare_remote(str(out) + "/", overwrite=True) == str(out)
    assert [f for _, _, files in os.walk(out) for f in files] == []


def test_the_output_directory_gets_the_usual_mode_not_a_scratch_directorys(tmp_path):
    umask = os.umask(0o022)
    try:
        with scratch_directory(str(tmp_path / "out"), overwrite=False) as scratch:
            assert os.path.isdir(scratch)
    finally:
        os.umask(umask)
    assert os.stat(tmp_path / "out").st_mode & 0o777 == 0o755
