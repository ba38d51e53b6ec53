"""The manifest that ``tfr-convert`` writes beside its shards, as the library reads it.

It names the feature count, the splits and their shard files, and their counts
and histograms (labels, list labels, list lengths).
"""

from __future__ import annotations

import json
import os

__all__ = ["load_manifest", "split_files", "label_levels", "count_training_lists", "longest_list"]


def load_manifest(data_dir: str) -> dict:
    """The ``manifest.json`` of a converted dataset.

    Raises:
      FileNotFoundError: naming the directory and the command that makes it.
      ValueError: naming the file (and line and column) when it is not JSON
        or lacks what every reader needs.
    """
    path = os.path.join(data_dir, "manifest.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{data_dir} holds no manifest.json: point --data at the output of one "
            "tfr-convert run (or one of its FoldN/ directories)"
        )
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{path}:{e.lineno}:{e.colno}: the manifest is not valid JSON ({e.msg}); "
            "rerun tfr-convert"
        ) from None
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path}: the manifest is not UTF-8 text (byte {e.start}); rerun tfr-convert"
        ) from None
    _check_manifest(path, manifest)
    return manifest


def _check_manifest(path: str, manifest) -> None:
    """The fields every reader relies on, with their types."""
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: the manifest is not a JSON object; rerun tfr-convert")
    for key, kind in (("num_features", int), ("splits", dict)):
        if not isinstance(manifest.get(key), kind):
            raise ValueError(
                f"{path}: the manifest's {key!r} is missing or not a JSON "
                f"{'integer' if kind is int else 'object'}; rerun tfr-convert"
            )
    for split, entry in manifest["splits"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
            raise ValueError(f"{path}: split {split!r} lists no 'files' object; rerun tfr-convert")


def split_files(data_dir: str, manifest: dict, split: str) -> list[str]:
    """The TFRecord shards of ``split``, as listed in the manifest."""
    if split not in manifest["splits"]:
        raise ValueError(f"{data_dir} has no {split!r} split; it has {sorted(manifest['splits'])}")
    return [os.path.join(data_dir, name) for name in manifest["splits"][split]["files"]]


def label_levels(manifest: dict) -> int:
    """Levels of the list label above 0: the highest training label value.

    With simulated clicks the labels are 0, 1 and the purchase label, and the
    list head predicts ``P(t >= k)`` for ``k = 1 .. purchase label``.
    """
    if manifest.get("label_kind") == "simulated_implicit":
        return int(manifest["parameters"]["clicks"]["purchase_label"])
    return int(manifest["max_relevance"])


def count_training_lists(manifest: dict, split: str, *, include_empty_lists: bool) -> int:
    """Lists one training epoch sees, from the manifest's list-label histogram."""
    entry = manifest["splits"][split]
    empty = int(entry["list_label_histogram"].get("0", 0))
    return entry["num_lists"] - (0 if include_empty_lists else empty)


def longest_list(manifest: dict) -> int:
    """The longest list over every split."""
    return max(int(e.get("longest_list", 1)) for e in manifest["splits"].values())
