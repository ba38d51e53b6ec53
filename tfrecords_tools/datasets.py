"""Known learning-to-rank datasets and the LETOR directory layouts they unpack to."""

from __future__ import annotations

import dataclasses
import os
import re


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A public LETOR dataset: its directory names, download page and split-file prefix."""

    name: str
    num_features: int
    max_relevance: int
    dir_names: tuple[str, ...]
    url: str
    file_prefix: str = ""


_MSLR_URL = "https://www.microsoft.com/en-us/research/project/mslr/"
_LETOR4_URL = (
    "https://www.microsoft.com/en-us/research/project/letor-learning-rank-information-retrieval/"
)

DATASETS = {
    info.name: info
    for info in (
        DatasetInfo("MSLR-WEB10K", 136, 4, ("MSLR-WEB10K", "mslr-web10k"), _MSLR_URL),
        DatasetInfo("MSLR-WEB30K", 136, 4, ("MSLR-WEB30K", "mslr-web30k"), _MSLR_URL),
        DatasetInfo("MQ2007", 46, 2, ("MQ2007", "mq2007"), _LETOR4_URL),
        DatasetInfo("MQ2008", 46, 2, ("MQ2008", "mq2008"), _LETOR4_URL),
        DatasetInfo(
            "Istella-S",
            220,
            4,
            ("Istella-S", "istella-s", "istella-s-letor", "istella-letor"),
            "https://istella.ai/datasets/letor-dataset/",
        ),
        DatasetInfo(
            "Yahoo Set 1",
            699,
            4,
            ("Yahoo Set 1", "yahoo-set1", "ltrc_yahoo", "yahoo"),
            "https://webscope.sandbox.yahoo.com/catalog.php?datatype=c",
            file_prefix="set1.",
        ),
    )
}


class DatasetNotFoundError(FileNotFoundError):
    """A named dataset, split or layout that is not on disk."""


def _normalise(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name).lower()


def get_dataset(name: str) -> DatasetInfo | None:
    """The known dataset called ``name`` (case, spaces and dashes ignored), else ``None``."""
    wanted = _normalise(name)
    for info in DATASETS.values():
        if _normalise(info.name) == wanted:
            return info
    return None


def find_dataset_dir(info: DatasetInfo, roots: list[str]) -> str:
    """The first ``root/<dir name>`` that exists, searching ``roots`` in order."""
    for root in roots:
        for dir_name in info.dir_names:
            candidate = os.path.join(root, dir_name)
            if os.path.isdir(candidate):
                return candidate
    looked = ", ".join(os.path.abspath(r) for r in roots)
    raise DatasetNotFoundError(
        f"{info.name} was not found: looked for a directory named "
        f"{' or '.join(repr(d) for d in info.dir_names)} in {looked}. Download it from "
        f"{info.url}, unpack it under one of these (or pass --data-dir / set TFR_DATA_DIR), "
        "or pass its directory to --input."
    )


_SPLIT_FILE = re.compile(r"^(?P<prefix>.*?)(?P<split>train|vali|valid|test)\.txt(?:\.gz)?$", re.I)
_FOLD_DIR = re.compile(r"^fold(\d+)$", re.I)


def _split_files(directory: str, prefix: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in sorted(os.listdir(directory)):
        match = _SPLIT_FILE.match(name)
        path = os.path.join(directory, name)
        if not match or not os.path.isfile(path):
            continue
        if prefix and match["prefix"].lower() != prefix.lower():
            continue
        split = match["split"].lower()
        split = "vali" if split == "valid" else split
        if split in found:
            raise DatasetNotFoundError(
                f"{directory}: both {os.path.basename(found[split])} and {name} look like the "
                f"{split} split; keep one"
            )
        found[split] = path
    return found


def _single_set(directory: str, prefix: str) -> dict[str, str]:
    found = _split_files(directory, prefix)
    if found:
        return found
    nested = [
        os.path.join(directory, d)
        for d in sorted(os.listdir(directory))
        if os.path.isdir(os.path.join(directory, d))
    ]
    candidates = [(d, _split_files(d, prefix)) for d in nested]
    candidates = [(d, f) for d, f in candidates if f]
    if len(candidates) == 1:
        return candidates[0][1]
    if len(candidates) > 1:
        names = ", ".join(d for d, _ in candidates)
        raise DatasetNotFoundError(f"{directory}: several split sets found ({names}); pass one")
    return {}


def find_folds(directory: str, *, prefix: str = "") -> dict[int | None, dict[str, str]]:
    """Maps fold number (``None`` for a single set) to ``{split: file}``."""
    if not os.path.isdir(directory):
        raise DatasetNotFoundError(f"{directory}: no such directory")
    folds: dict[int | None, dict[str, str]] = {}
    for name in sorted(os.listdir(directory)):
        match = _FOLD_DIR.match(name)
        if match and os.path.isdir(os.path.join(directory, name)):
            folds[int(match[1])] = _split_files(os.path.join(directory, name), prefix)
    if not folds:
        folds = {None: _single_set(directory, prefix)}
    for fold, files in folds.items():
        if "train" not in files:
            where = directory if fold is None else os.path.join(directory, f"Fold{fold}")
            raise DatasetNotFoundError(
                f"{where}: no train file found; expected train.txt (or .txt.gz), with vali.txt "
                "and test.txt beside it, or Fold1..FoldN subdirectories holding them"
            )
    return dict(sorted(folds.items(), key=lambda kv: -1 if kv[0] is None else kv[0]))
