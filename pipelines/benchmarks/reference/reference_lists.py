"""The lists ``reference_runner`` feeds the released code, and their statistics.

:func:`read_letor` reads a LETOR file and :func:`read_lists` an ``.npz`` of
lists (our conversion's, see ``reference_parity.shared_lists``) as the
DataFrame the released ``LearningToRankDataset`` takes; :func:`list_stats`
summarizes simulated lists (``click_parity`` compares ours with the released
simulation's). Like the runner it needs only numpy and pandas (imported when
called), so it runs with the Python that has torch as well as this project's:
``reference_runner.py`` imports it from its own directory when run as a
script, and ``click_parity`` through the package.
"""

from __future__ import annotations

import gzip


def read_letor(path: str):
    """A LETOR file (or ``.gz``) as the DataFrame the released dataset class takes:
    ``target``, ``qid`` and one column per feature (absent features are 0)."""
    import numpy as np
    import pandas as pd

    labels, qids, rows, width = [], [], [], 0
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            tokens = line.split("#", 1)[0].split()
            if not tokens:
                continue
            labels.append(int(float(tokens[0])))
            qids.append(int(tokens[1].partition(":")[2]))
            values = {}
            for token in tokens[2:]:
                index, _, value = token.partition(":")
                values[int(index)] = float(value)
            width = max(width, max(values, default=0))
            rows.append(values)
    features = np.zeros((len(rows), width))
    for i, values in enumerate(rows):
        for index, value in values.items():
            features[i, index - 1] = value
    frame = pd.DataFrame(features, columns=[f"f{i:04d}" for i in range(1, width + 1)])
    frame.insert(0, "qid", qids)
    frame.insert(0, "target", labels)
    return frame


def read_lists(path: str):
    """An ``.npz`` of lists as the DataFrame the released dataset class takes when
    it simulates nothing: ``target`` (y), ``explicit_target`` (r), ``qid`` (the
    list's index, so bootstrapped lists of one query stay apart) and features."""
    import numpy as np
    import pandas as pd

    with np.load(path) as arrays:
        features, offsets = arrays["features"], arrays["offsets"]
        label, relevance = arrays["label"], arrays["relevance"]
    width = features.shape[1]
    frame = pd.DataFrame(
        features.astype(np.float64), columns=[f"f{i:04d}" for i in range(1, width + 1)]
    )
    frame.insert(0, "qid", np.repeat(np.arange(len(offsets) - 1), np.diff(offsets)))
    frame.insert(0, "explicit_target", relevance.astype(np.int64))
    frame.insert(0, "target", label.astype(np.int64))
    return frame


def list_stats(label, relevance, offsets) -> dict:
    """Summary statistics of simulated lists (numpy arrays: per-item label y and
    relevance r, ``offsets`` ``[lists + 1]``): the share of lists whose best label
    t is 0, 1 and 4, clicks (y >= 1) and purchases (y = 4) per list, the share of
    lists whose best relevance is 0 and 2, and items per list."""
    import numpy as np

    starts = np.asarray(offsets[:-1])
    label, relevance = np.asarray(label, float), np.asarray(relevance, float)
    t = np.maximum.reduceat(label, starts)
    r = np.maximum.reduceat(relevance, starts)
    return {
        "t=0": float(np.mean(t == 0)),
        "t=1": float(np.mean(t == 1)),
        "t=4": float(np.mean(t == 4)),
        "clicks/list": float(np.add.reduceat(label >= 1, starts).mean()),
        "purchases/list": float(np.add.reduceat(label == 4, starts).mean()),
        "max r=0": float(np.mean(r == 0)),
        "max r=2": float(np.mean(r == 2)),
        "items/list": float(np.diff(offsets).mean()),
    }
