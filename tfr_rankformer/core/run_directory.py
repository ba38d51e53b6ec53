"""A run directory's life: its state (``run_state.json``: ``running``, ``failed`` or
``complete``) and who may write into it. A non-empty directory is refused unless told to
``resume`` the same run or to ``overwrite`` it (the old run is moved aside, deleted when the
new one completes, put back if it fails); one holding files no run writes always is.

>>> describe_entries(["metrics.json", "checkpoints/", "a", "b", "c", "d", "e", "f"])
'metrics.json, checkpoints/, a, b, c and 3 more'
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator

from tfr_rankformer.core import run_layout as layout
from tfr_rankformer.core.config_io import write_json

logger = logging.getLogger(__name__)

EXISTING_RUN = ("refuse", "resume", "overwrite")
# Everything a run writes at its top level (and ``<name>.partial`` while writing it).
RUN_ENTRIES = frozenset(
    {
        *(layout.CONFIG_NAME, layout.METRICS_NAME, layout.HISTORY_NAME, layout.LOGS_NAME),
        *(layout.CHECKPOINTS_NAME, layout.BACKUP_NAME, layout.EXPORT_NAME),
        *(layout.RUN_STATE_NAME, layout.VOCAB_NAME, layout.TEXT_RUN_NAME),
        *("model.txt", "gbdt_labels"),
    }
)
# Settings a resumed run may change: more epochs continue a finished schedule's run.
_RESUMABLE_CHANGES = ("epochs", "model_dir")


class RunExistsError(FileExistsError):
    """The run directory holds something the command was not told to replace or resume."""


def describe_entries(names: list[str], shown: int = 5) -> str:
    """At most ``shown`` names, then how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


@dataclasses.dataclass(frozen=True)
class RunDirectory:
    """A non-empty run directory: its top-level ``entries`` (directories end in ``/``), the
    ``foreign`` ones no run writes, its ``state``, ``config.json`` and ``run_state.json``."""

    path: str
    entries: list[str]
    foreign: list[str]
    state: str
    settings: dict
    record: dict

    def describe(self) -> str:
        """E.g. ``a complete mlp run (config.json, metrics.json, export/)``."""
        article = "an" if self.state[0] in "aeiou" else "a"
        model = self.settings.get("model") or "unknown-model"
        return f"{article} {self.state} {model} run ({describe_entries(self.entries)})"

    def live_process(self) -> int | None:
        """The pid of the process running this run on this host, if it still lives."""
        pid = self.record.get("pid")
        if self.state != "running" or self.record.get("host") != socket.gethostname():
            return None
        if not isinstance(pid, int) or pid == os.getpid():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return pid


def inspect_run(path: str) -> RunDirectory | None:
    """What ``path`` holds; ``None`` when absent or empty; ``RunExistsError`` for a file."""
    if not os.path.lexists(path):
        return None
    if not os.path.isdir(path):
        raise RunExistsError(f"{path} is a file, not a run directory")
    names = sorted(os.listdir(path))
    if not names:
        return None
    entries = [n + "/" if os.path.isdir(os.path.join(path, n)) else n for n in names]
    foreign = [e for e, n in zip(entries, names) if n.removesuffix(".partial") not in RUN_ENTRIES]
    record = layout.read_json(os.path.join(path, layout.RUN_STATE_NAME))
    state = record.get("state")
    if state not in layout.RUN_STATES:
        has_metrics = os.path.isfile(os.path.join(path, layout.METRICS_NAME))
        state = "complete" if has_metrics else "interrupted"
    settings = layout.read_json(os.path.join(path, layout.CONFIG_NAME))
    return RunDirectory(path, entries, foreign, state, settings, record)


def _write_state(path: str, state: str, **details) -> None:
    record = layout.read_json(os.path.join(path, layout.RUN_STATE_NAME))
    record.update(details, state=state, updated=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    if state == "running":
        record.update(pid=os.getpid(), host=socket.gethostname())
        record.pop("error", None)
    write_json(os.path.join(path, layout.RUN_STATE_NAME), record)


def _flat(settings: dict, prefix: str = "") -> dict:
    """``{"architecture": {"num_layers": 3}}`` -> ``{"architecture.num_layers": 3}``."""
    flat = {}
    for key, value in json.loads(json.dumps(settings)).items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _changed_settings(old: dict, new: dict) -> list[str]:
    """``name old -> new`` for each setting of ``new`` that differs, ``epochs`` aside.

    >>> _changed_settings({"model": "mlp", "epochs": 2}, {"model": "rankformer", "epochs": 9})
    ["model 'mlp' -> 'rankformer'"]
    """
    old, new = _flat(old), _flat(new)
    keys = sorted(set(new) - set(_RESUMABLE_CHANGES))
    return [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys if old.get(k) != new.get(k)]


def _aside_directories(path: str) -> list[str]:
    """Runs an --overwrite moved aside and has not deleted yet."""
    final = os.path.abspath(path)
    prefix = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.replaced-")
    return sorted(glob.glob(glob.escape(prefix) + "*"))


def _refusal(run: RunDirectory, *, resumable: bool) -> str:
    options = "pass --overwrite to replace it"
    if resumable and run.state != "complete":
        options = "pass --resume to continue it or --overwrite to replace it"
    message = f"{run.path} already holds {run.describe()}: {options}, or choose another directory"
    leftovers = _aside_directories(run.path)
    if leftovers:
        message += f" (an interrupted --overwrite left the run it was replacing in {leftovers[0]})"
    return message


def _check_resume(run: RunDirectory, settings: dict, *, resumable: bool) -> None:
    again = "pass --overwrite to train it again"
    if not resumable and run.state != "complete":
        model = settings.get("model")
        raise RunExistsError(
            f"{run.path} holds {run.describe()}; a {model} run cannot resume: {again}"
        )
    if run.state == "complete" and run.settings.get("epochs") != settings.get("epochs"):
        raise RunExistsError(
            f"{run.path} holds {run.describe()} of {run.settings.get('epochs')} epochs: "
            "a complete run keeps no backup to continue from, so --resume cannot extend it; "
            + again
        )
    changed = _changed_settings(run.settings, settings)
    if changed:
        raise RunExistsError(
            f"{run.path} holds {run.describe()} with other settings ({'; '.join(changed)}): "
            "--resume continues a run with its own settings (only --epochs may change); "
            "pass --overwrite to replace it"
        )


def check_run_directory(
    path: str, settings: dict, *, existing: str = "refuse", resumable: bool = True
) -> str:
    """How a run would start in ``path`` (``new``, ``resume``, ``complete``, ``overwrite``),
    without writing; else ``RunExistsError``."""
    if existing not in EXISTING_RUN:
        raise ValueError(f"existing must be one of {EXISTING_RUN}, got {existing!r}")
    run = inspect_run(path)
    if run is None:
        return "new"
    if run.foreign:
        raise RunExistsError(
            f"{path} holds files a run never writes ({describe_entries(run.foreign)}): "
            "runs are written only into an empty directory or their own run's; "
            "choose another directory"
        )
    pid = run.live_process()
    if pid is not None:
        raise RunExistsError(f"{path} holds a run that process {pid} is still training")
    if existing == "refuse":
        raise RunExistsError(_refusal(run, resumable=resumable))
    if existing == "overwrite":
        return "overwrite"
    _check_resume(run, settings, resumable=resumable)
    return "complete" if run.state == "complete" else "resume"


@contextlib.contextmanager
def run_session(
    path: str, settings: dict, *, existing: str = "refuse", resumable: bool = True
) -> Iterator[str]:
    """Opens ``path`` for a run and records its state; yields ``new``, ``resume`` or
    ``complete`` (nothing to train). A block that raises leaves the run ``failed``, or puts
    back the run an ``--overwrite`` replaced."""
    start = check_run_directory(path, settings, existing=existing, resumable=resumable)
    replaced, details = None, {}
    if start == "overwrite":
        run = inspect_run(path)
        final = os.path.abspath(path)
        prefix = f".{os.path.basename(final)}.replaced-"
        replaced = tempfile.mkdtemp(prefix=prefix, dir=os.path.dirname(final))
        os.rename(final, os.path.join(replaced, "old"))
        logger.info("%s: replacing %s (moved aside until done)", path, run.describe())
        # The run moved aside now, and any an interrupted --overwrite had moved aside.
        details = {"replaces": [replaced, *run.record.get("replaces", [])]}
        start = "new"
    os.makedirs(path, exist_ok=True)
    if start == "new":
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(path, layout.RUN_STATE_NAME))
    if start != "complete":
        _write_state(path, "running", **details)
    try:
        yield start
    except BaseException as error:
        if replaced is not None:
            _restore(path, replaced)
        else:  # a full or read-only disk may refuse this too: the run stays "running"
            with contextlib.suppress(OSError):
                _write_state(path, "failed", error=f"{type(error).__name__}: {error}")
        raise
    if start != "complete":
        _write_state(path, "complete")
    _finish_replacement(path)


def _restore(path: str, holder: str) -> None:
    """Puts back the run an ``--overwrite`` moved aside."""
    try:
        shutil.rmtree(path)
        os.rename(os.path.join(holder, "old"), path)
        os.rmdir(holder)
    except OSError as e:
        logger.error("%s: the replaced run stays in %s: %s", path, holder, e)
        return
    logger.info("%s: the new run failed; the run it was replacing is back", path)


def _finish_replacement(path: str) -> None:
    """Deletes the runs this one replaced (an interrupted --overwrite's too)."""
    record = layout.read_json(os.path.join(path, layout.RUN_STATE_NAME))
    holders = record.pop("replaces", None)
    for holder in holders if isinstance(holders, list) else []:
        if isinstance(holder, str) and os.path.isdir(holder):
            shutil.rmtree(holder, ignore_errors=True)
    if holders:
        write_json(os.path.join(path, layout.RUN_STATE_NAME), record)
