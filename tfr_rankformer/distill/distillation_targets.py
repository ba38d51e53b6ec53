"""The distillation student's targets, derived from the teacher's scores."""

from __future__ import annotations

import numpy as np

from tfr_rankformer.inputs.list_arrays import ListArrays


def centred_scores(scores: np.ndarray, arrays: ListArrays) -> np.ndarray:
    """``scores`` minus the mean of their list."""
    sizes = arrays.sizes
    sums = np.add.reduceat(scores.astype(np.float64), arrays.offsets[:-1][sizes > 0])
    means = np.zeros(arrays.num_lists)
    means[sizes > 0] = sums / sizes[sizes > 0]
    return (scores - np.repeat(means, sizes)).astype(np.float32)


def graded_targets(scores: np.ndarray, arrays: ListArrays, grades: int) -> np.ndarray:
    """Integer grades ``0 .. grades - 1`` from each list's ranking by ``scores``."""
    out = np.zeros(len(scores), np.int32)
    for i in range(arrays.num_lists):
        begin, end = arrays.offsets[i], arrays.offsets[i + 1]
        n = end - begin
        ranks = np.empty(n, np.int64)
        ranks[np.argsort(-scores[begin:end], kind="stable")] = np.arange(n)
        out[begin:end] = (grades * (n - 1 - ranks)) // max(n, 1)
    return out


def student_targets(
    params: dict,
    teacher_scores: dict[str, np.ndarray],
    train: ListArrays,
    vali: ListArrays | None,
    *,
    target: str,
    grades: int,
) -> tuple[dict, np.ndarray, np.ndarray | None]:
    """The student's LightGBM parameters, training targets and validation targets."""
    # The student stops early on its fit to the teacher (selected on the labels already).
    if target == "scores":
        student_params = {**params, "objective": "regression", "metric": "l2"}
        targets = centred_scores(teacher_scores["train"], train)
        vali_targets = centred_scores(teacher_scores["vali"], vali) if vali else None
    else:
        student_params = {**params, "objective": "lambdarank"}
        student_params["label_gain"] = [float(2**g - 1) for g in range(grades)]
        targets = graded_targets(teacher_scores["train"], train, grades)
        vali_targets = graded_targets(teacher_scores["vali"], vali, grades) if vali else None
    return student_params, targets, vali_targets
