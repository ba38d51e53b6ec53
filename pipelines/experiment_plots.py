"""The experiment's PNG plots (matplotlib, no display needed).

* ``labels.png``: the distribution of the list label ``t`` in the training
  split, and of the explicit relevance per training label (the RankFormer
  paper's Figure 2: how simulated clicks and purchases relate to relevance);
  on text data, the training documents' relevance and the lists' lengths;
* ``ndcg.png``: the table's test NDCGs per model, mean with standard error
  bars;
* ``validation.png``: validation NDCG_y@10 per epoch of the neural models,
  averaged over their runs.
"""

from __future__ import annotations

import csv
import math
import os
import textwrap

import numpy as np

from pipelines.experiment_summary import REPORTED
from tfr_rankformer.inputs import data
from tfr_rankformer.inputs.list_arrays import read_split

__all__ = ["draw_all"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_labels(path: str, fold_data: str) -> None:
    plt = _pyplot()
    manifest = data.load_manifest(fold_data)
    train = read_split(fold_data, manifest, "train")
    t = train.list_labels().astype(int)
    y = train.label.astype(int)
    r = train.relevance.astype(int)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    levels = np.arange(max(int(t.max(initial=0)), 0) + 1)
    counts = np.bincount(t, minlength=len(levels))
    left.bar(levels, counts / max(counts.sum(), 1))
    left.set_xticks(levels)
    left.set_xlabel("list label t = max_i y_i")
    left.set_ylabel("fraction of training lists")
    left.set_title("list labels")
    relevance_levels = np.arange(max(int(r.max(initial=0)), 0) + 1)
    label_levels = np.unique(y)
    width = 0.8 / max(len(label_levels), 1)
    for i, label in enumerate(label_levels):
        share = np.bincount(r[y == label], minlength=len(relevance_levels))
        share = share / max(share.sum(), 1)
        right.bar(relevance_levels + i * width, share, width, label=f"y = {label}")
    right.set_xticks(relevance_levels + width * (len(label_levels) - 1) / 2)
    right.set_xticklabels([str(v) for v in relevance_levels])
    right.set_xlabel("explicit relevance r")
    right.set_ylabel("fraction of items with this y")
    right.set_title("explicit relevance per training label")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def draw_text_labels(path: str, fold_data: str) -> None:
    """The training split's document relevance and list lengths (text data)."""
    from tfrecords_tools.text.text_elwc import read_text_split

    relevance, lengths = [], []
    for text_list in read_text_split(fold_data, "train"):
        relevance.extend(int(r) for r in text_list.relevance)
        lengths.append(len(text_list.document_ids))
    plt = _pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    counts = np.bincount(np.asarray(relevance, dtype=int), minlength=1)
    levels = np.arange(len(counts))
    left.bar(levels, counts / max(counts.sum(), 1))
    left.set_xticks(levels)
    left.set_xlabel("relevance")
    left.set_ylabel("fraction of training documents")
    left.set_title("document relevance")
    right.hist(lengths, bins=min(30, max(len(set(lengths)), 1)))
    right.set_xlabel("documents in the list")
    right.set_ylabel("training lists")
    right.set_title("list lengths")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def draw_ndcg(path: str, summary: dict, keys: tuple = REPORTED) -> None:
    plt = _pyplot()
    labels = list(summary)
    figure, ax = plt.subplots(figsize=(max(6, 1.3 * len(labels) + 2), 4))
    x = np.arange(len(labels))
    width = 0.76 / len(keys)
    for i, key in enumerate(keys):
        means = [summary[label][key]["mean"] for label in labels]
        errors = [summary[label][key]["se"] for label in labels]
        errors = [0.0 if math.isnan(e) else e for e in errors]
        offset = (i - (len(keys) - 1) / 2) * width
        ax.bar(x + offset, means, width, yerr=errors, capsize=3, label=key)
    finite = [
        summary[label][key]["mean"]
        for label in labels
        for key in keys
        if not math.isnan(summary[label][key]["mean"])
    ]
    if finite:
        ax.set_ylim(max(0.0, min(finite) - 10), min(100.0, max(finite) + 5))
    ax.set_xticks(x)
    # Long specs (model:key=value:...) are wrapped at their colons.
    ticks = [textwrap.fill(label.replace(":", ": "), 28) for label in labels]
    ax.set_xticklabels(ticks, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("test NDCG x 100")
    ax.set_title("NDCG per model (mean ± standard error over runs)")
    ax.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _validation_curve(run_dir: str) -> list[float]:
    path = os.path.join(run_dir, "history.csv")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [
            float(row["val_ndcg_y@10"]) for row in csv.DictReader(f) if row.get("val_ndcg_y@10")
        ]


def draw_validation(path: str, runs: list[dict], labels: list[str]) -> bool:
    """Returns False (and draws nothing) when no neural run logged validation NDCG."""
    curves = {}
    for label in labels:
        mine = [_validation_curve(r["run_dir"]) for r in runs if r["model"] == label]
        mine = [c for c in mine if c]
        if mine:
            epochs = max(len(c) for c in mine)
            # Runs stopped early contribute to the epochs they reached.
            curves[label] = [
                float(np.mean([c[e] for c in mine if len(c) > e])) for e in range(epochs)
            ]
    if not curves:
        return False
    plt = _pyplot()
    figure, ax = plt.subplots(figsize=(7, 4))
    for label, curve in curves.items():
        ax.plot(np.arange(1, len(curve) + 1), curve, marker="o", markersize=3, label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation NDCG_y@10 x 100")
    ax.set_title("validation NDCG per epoch (mean over runs)")
    ax.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def draw_all(output: str, results: dict, folds: dict, specs) -> list[str]:
    """Draws every plot into ``output``; returns the paths written."""
    written = []
    path = os.path.join(output, "labels.png")
    if results.get("kind") == "text":
        draw_text_labels(path, folds[min(folds)])
    else:
        draw_labels(path, folds[min(folds)])
    written.append(path)
    path = os.path.join(output, "ndcg.png")
    draw_ndcg(path, results["summary"], tuple(results.get("reported", REPORTED)))
    written.append(path)
    path = os.path.join(output, "validation.png")
    neural = [s.label for s in specs if s.is_neural]
    if draw_validation(path, results["runs"], neural):
        written.append(path)
    return written
