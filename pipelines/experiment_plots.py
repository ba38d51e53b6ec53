"""The experiment's PNG plots (matplotlib, no display needed).

``labels.png``: the training split's list labels t and the explicit relevance per
training label (the RankFormer paper's Figure 2); on text data, the documents'
relevance and the lists' lengths. ``ndcg.png``: the table's test NDCGs per model with
standard error bars. ``validation.png``: the neural models' validation NDCG per epoch.
"""

from __future__ import annotations

import csv
import math
import os
import textwrap

import numpy as np

from pipelines.experiment_summary import REPORTED
from tfr_rankformer.inputs.list_arrays import read_split
from tfr_rankformer.inputs.manifest import load_manifest


def _figure(columns: int = 1, size=(10, 4)):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, columns, figsize=size)


def _save(figure, path: str) -> None:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _shares(ax, values: np.ndarray) -> None:
    """A bar per level 0 .. max of ``values``: the share of values at it."""
    counts = np.bincount(values, minlength=1)
    levels = np.arange(len(counts))
    ax.bar(levels, counts / max(counts.sum(), 1))
    ax.set_xticks(levels)


def draw_labels(path: str, fold_data: str) -> None:
    train = read_split(fold_data, load_manifest(fold_data), "train")
    y, r = train.label.astype(int), train.relevance.astype(int)
    figure, (left, right) = _figure(2)
    _shares(left, train.list_labels().astype(int))
    left.set(xlabel="list label t = max_i y_i", ylabel="fraction of training lists")
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
    right.set(xlabel="explicit relevance r", ylabel="fraction of items with this y")
    right.set_title("explicit relevance per training label")
    right.legend()
    _save(figure, path)


def draw_text_labels(path: str, fold_data: str) -> None:
    """The training split's document relevance and list lengths (text data)."""
    from tfrecords_tools.text.text_elwc import read_text_split

    relevance, lengths = [], []
    for text_list in read_text_split(fold_data, "train"):
        relevance.extend(int(r) for r in text_list.relevance)
        lengths.append(len(text_list.document_ids))
    figure, (left, right) = _figure(2)
    _shares(left, np.asarray(relevance, dtype=int))
    left.set(xlabel="relevance", ylabel="fraction of training documents")
    left.set_title("document relevance")
    right.hist(lengths, bins=min(30, max(len(set(lengths)), 1)))
    right.set(xlabel="documents in the list", ylabel="training lists", title="list lengths")
    _save(figure, path)


def draw_ndcg(path: str, summary: dict, keys: tuple = REPORTED) -> None:
    labels = list(summary)
    figure, ax = _figure(size=(max(6, 1.3 * len(labels) + 2), 4))
    x = np.arange(len(labels))
    width = 0.76 / len(keys)
    for i, key in enumerate(keys):
        means = [summary[label][key]["mean"] for label in labels]
        errors = [summary[label][key]["se"] for label in labels]
        errors = [0.0 if math.isnan(e) else e for e in errors]
        offset = (i - (len(keys) - 1) / 2) * width
        ax.bar(x + offset, means, width, yerr=errors, capsize=3, label=key)
    finite = [m for v in summary.values() for k in keys if not math.isnan(m := v[k]["mean"])]
    if finite:
        ax.set_ylim(max(0.0, min(finite) - 10), min(100.0, max(finite) + 5))
    ax.set_xticks(x)
    # Long specs (model:key=value:...) are wrapped at their colons.
    ticks = [textwrap.fill(label.replace(":", ": "), 28) for label in labels]
    ax.set_xticklabels(ticks, rotation=20, ha="right", fontsize=8)
    ax.set(ylabel="test NDCG x 100", title="NDCG per model (mean ± standard error over runs)")
    ax.legend()
    _save(figure, path)


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
        mine = [c for r in runs if r["model"] == label and (c := _validation_curve(r["run_dir"]))]
        if mine:  # runs stopped early count for the epochs they reached
            epochs = range(max(len(c) for c in mine))
            curves[label] = [float(np.mean([c[e] for c in mine if len(c) > e])) for e in epochs]
    if not curves:
        return False
    figure, ax = _figure(size=(7, 4))
    for label, curve in curves.items():
        ax.plot(np.arange(1, len(curve) + 1), curve, marker="o", markersize=3, label=label)
    ax.set(xlabel="epoch", ylabel="validation NDCG_y@10 x 100")
    ax.set_title("validation NDCG per epoch (mean over runs)")
    ax.legend()
    _save(figure, path)
    return True


def draw_all(output: str, results: dict, folds: dict, specs) -> list[str]:
    """Draws every plot into ``output``; returns the paths written."""
    labels, ndcg = os.path.join(output, "labels.png"), os.path.join(output, "ndcg.png")
    draw = draw_text_labels if results.get("kind") == "text" else draw_labels
    draw(labels, folds[min(folds)])
    draw_ndcg(ndcg, results["summary"], tuple(results.get("reported", REPORTED)))
    validation = os.path.join(output, "validation.png")
    neural = [s.label for s in specs if s.is_neural]
    drawn = draw_validation(validation, results["runs"], neural)
    return [labels, ndcg] + ([validation] if drawn else [])
