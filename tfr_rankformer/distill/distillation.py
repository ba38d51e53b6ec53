"""``tfr-distill``: a pointwise LightGBM student fitted to a teacher's scores, and a GBDT of
the same settings fitted to the labels (in ``gbdt_labels/``), compared on held-out splits.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import time

import numpy as np

from tfr_rankformer.core.atomic_files import atomic_path
from tfr_rankformer.core.config_io import from_dict, require_positive_ints, write_json
from tfr_rankformer.core.run_directory import RunExistsError, describe_entries, inspect_run
from tfr_rankformer.core.run_layout import CONFIG_NAME, METRICS_NAME
from tfr_rankformer.distill.distillation_targets import student_targets
from tfr_rankformer.distill.distillation_teacher import Teacher, load_teacher
from tfr_rankformer.gbdt.gbdt_booster import (
    evaluate_arrays,
    fit_booster,
    save_booster,
    score_arrays,
)
from tfr_rankformer.gbdt.gbdt_config import GBDTConfig
from tfr_rankformer.inputs.list_arrays import ListArrays, read_split
from tfr_rankformer.inputs.manifest import Manifest, load_manifest

logger = logging.getLogger(__name__)

TARGETS = ("scores", "graded")


@dataclasses.dataclass(frozen=True)
class DistillConfig:
    """Settings of one distillation (``tfr-distill``'s options say what each is).

    Attributes:
      data: a converted dataset; ``None``: the one the teacher was trained on (an
        exported SavedModel does not record it).
      target: ``"scores"`` (regression on the teacher's scores minus their list
        mean, an offset a pointwise student cannot see) or ``"graded"`` (lambdarank
        on grades of the teacher's ranking).
      preset, params, early_stopping_rounds, num_threads, seed: both GBDTs'.
    """

    teacher: str = ""
    output: str = ""
    data: str | None = None
    trees: int = 2000
    target: str = "scores"
    grades: int = 5
    preset: str = "gbdt-1k"
    params: dict = dataclasses.field(default_factory=dict)
    early_stopping_rounds: int = 100
    num_threads: int | None = None
    seed: int = 0
    batch_size: int = 256
    overwrite: bool = False

    def __post_init__(self):
        if not self.teacher or not self.output:
            raise ValueError("`teacher` and `output` must be given")
        if self.target not in TARGETS:
            raise ValueError(f"Unknown target {self.target!r}; choose from {list(TARGETS)}")
        require_positive_ints(self, "trees", "batch_size")
        if isinstance(self.grades, bool) or not isinstance(self.grades, int) or self.grades < 2:
            raise ValueError(f"`grades` must be an int >= 2, got {self.grades!r}")

    def gbdt_config(self, model_dir: str) -> GBDTConfig:
        """The label GBDT's settings (the student shares its LightGBM parameters)."""
        return GBDTConfig(
            preset=self.preset,
            data=self.data or "",
            model_dir=model_dir,
            params={**self.params, "num_iterations": self.trees},
            early_stopping_rounds=self.early_stopping_rounds,
            num_threads=self.num_threads,
            seed=self.seed,
        )

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, values: dict) -> DistillConfig:
        return from_dict(cls, values, what="distillation settings")


def list_spearman(a: np.ndarray, b: np.ndarray, arrays: ListArrays) -> float:
    """Mean within-list Spearman correlation of ``a`` and ``b`` over lists where both vary."""
    from scipy.stats import spearmanr

    values = []
    for i in range(arrays.num_lists):
        begin, end = arrays.offsets[i], arrays.offsets[i + 1]
        x, y = a[begin:end], b[begin:end]
        if end - begin < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        values.append(spearmanr(x, y).statistic)
    return float(np.mean(values)) if values else float("nan")


def _timed(function, *args, **kwargs) -> tuple:
    """``function``'s result and the seconds it took."""
    started = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - started


def distill(config: DistillConfig) -> dict:
    """Distills; returns ``metrics.json``'s content. A failed run leaves no output."""
    final = os.path.abspath(config.output)
    existing = inspect_run(final)  # None: absent or empty
    if existing is not None and existing.foreign:
        raise RunExistsError(
            f"{config.output} holds files tfr-distill never writes "
            f"({describe_entries(existing.foreign)}): --overwrite replaces only a run's "
            "directory; choose another --output"
        )
    if existing is not None and not config.overwrite:
        raise FileExistsError(f"{final} already exists; pass --overwrite to replace it")
    with atomic_path(final) as work:
        metrics = _distill(config, work)
        if os.path.isdir(final):  # --overwrite: the old run goes once the new one is complete
            shutil.rmtree(final)
    return metrics


def _distill(config: DistillConfig, work: str) -> dict:
    teacher, config, manifest = _teacher_and_manifest(config)
    os.makedirs(work)
    write_json(os.path.join(work, CONFIG_NAME), config.to_json())
    splits = {split: read_split(config.data, manifest, split) for split in manifest.splits}
    train = splits["train"]
    if not train.num_lists:
        raise ValueError(f"{config.data}: the train split holds no lists")
    vali = splits.get("vali")

    logger.info("scoring %d training lists with the teacher (%s)", train.num_lists, teacher.kind)
    teacher_timed = {split: _timed(teacher.score, arrays) for split, arrays in splits.items()}
    teacher_scores = {split: scores for split, (scores, _) in teacher_timed.items()}

    label_config = config.gbdt_config(os.path.join(config.output, "gbdt_labels"))
    label_dir = os.path.join(work, "gbdt_labels")
    params = label_config.lightgbm_params()
    student_params, targets, vali_targets = student_targets(
        params, teacher_scores, train, vali, target=config.target, grades=config.grades
    )
    fit = dict(early_stopping_rounds=config.early_stopping_rounds, log_every=100)
    logger.info("fitting the student (%s target) on %d lists", config.target, train.num_lists)
    (student, _), student_seconds = _timed(
        fit_booster, student_params, train, targets, vali=vali, vali_targets=vali_targets, **fit
    )
    save_booster(student, work)

    labelled = train.select(train.list_labels() > 0)  # the baselines' training-list policy
    logger.info("fitting the label GBDT on %d lists with t > 0", labelled.num_lists)
    (label_model, _), label_seconds = _timed(
        fit_booster, params, labelled, np.rint(labelled.label).astype(np.int32), vali=vali, **fit
    )
    save_booster(label_model, label_dir)
    write_json(os.path.join(label_dir, CONFIG_NAME), label_config.to_json())

    seconds = {"teacher": teacher.training_seconds, "student": student_seconds}
    seconds["gbdt_labels"] = label_seconds
    max_label = manifest.label_levels
    metrics = _evaluations(splits, teacher_timed, student, label_model, seconds, max_label)
    metrics["training"] = {
        "seconds": student_seconds,
        "trees": student.best_iteration or student.current_iteration(),
        "label_gbdt_trees": label_model.best_iteration or label_model.current_iteration(),
        "teacher": {"path": teacher.path, "kind": teacher.kind},
        "lists": train.num_lists,
        "student_lightgbm_params": student_params,
    }
    metrics["settings"] = config.to_json()
    write_json(os.path.join(work, METRICS_NAME), metrics)
    return metrics


def _teacher_and_manifest(config: DistillConfig) -> tuple[Teacher, DistillConfig, Manifest]:
    """The teacher, ``config`` with its ``data`` filled in, and that dataset's manifest."""
    teacher = load_teacher(config.teacher, batch_size=config.batch_size)
    data_dir = config.data or teacher.data
    if not data_dir:
        raise ValueError(f"teacher {config.teacher} does not record its training data: give --data")
    config = dataclasses.replace(config, data=data_dir)
    manifest = load_manifest(data_dir)
    if manifest.num_features != teacher.num_features:
        raise ValueError(
            f"{data_dir} has {manifest.num_features} features; the teacher takes "
            f"{teacher.num_features}"
        )
    return teacher, config, manifest


def _evaluations(
    splits: dict[str, ListArrays],
    teacher_timed: dict[str, tuple[np.ndarray, float]],
    student,
    label_model,
    seconds: dict,
    max_label: int,
) -> dict:
    """The student's metrics, and teacher, student and label GBDT compared but on train."""
    metrics: dict = {"comparison": {}, "fidelity": {}}
    for split, arrays in splits.items():
        scored = {
            "teacher": teacher_timed[split],
            "student": _timed(score_arrays, student, arrays),
            "gbdt_labels": _timed(score_arrays, label_model, arrays),
        }
        student_scores, teacher_scores = scored["student"][0], scored["teacher"][0]
        metrics[split] = evaluate_arrays(student_scores, arrays, max_label=max_label)
        if split == "train":
            continue
        metrics["comparison"][split] = {
            name: {
                **evaluate_arrays(scores, arrays, max_label=max_label),
                "training_seconds": seconds[name],
                "scoring_ms_per_list": 1000 * took / max(arrays.num_lists, 1),
            }
            for name, (scores, took) in scored.items()
        }
        # The label GBDT's agreement is the reference: how far a GBDT of the same size
        # agrees with the teacher without being taught by it.
        label_scores = scored["gbdt_labels"][0]
        metrics["fidelity"][split] = {
            "spearman_student_teacher": list_spearman(student_scores, teacher_scores, arrays),
            "spearman_label_gbdt_teacher": list_spearman(label_scores, teacher_scores, arrays),
        }
    return metrics
