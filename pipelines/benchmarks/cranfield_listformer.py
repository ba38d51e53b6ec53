"""The Listformer's columns of the Cranfield re-ranking benchmark (``cranfield_rerank``).

Per fold and per variant (``VARIANTS``: with the first stage's score, the
default, and without it), the Listformer from the ``--init-from`` checkpoint:

- ``<variant>@0``: before its first step (``text_family``'s model as built:
  the residual over the checkpoint's cosine, and BM25's score, is all it has);
- ``<variant>``: after ``tfr-train`` with default flags (``--epochs`` may be
  given; ``--evaluate-splits none``, as the benchmark scores the test lists
  itself), in a child process whose peak RSS (``wait4``) is recorded beside
  the plan's estimate and the seconds per epoch (training and validation),
  and kept in ``runs/FoldN/<variant>.peak_rss`` for ``--reuse-runs``.

Both are scored by ``rerank_scorers.ModelScorer`` on the fold's test lists, so
their NDCG is computed as BM25's and the cosine's are.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

from pipelines.benchmarks.rerank_scorers import ModelScorer, Scorer

__all__ = ["VARIANTS", "initial_scorer", "train_variant", "trained_scorer"]

# Variant name -> tfr-train flags beside the defaults.
VARIANTS = {"listformer": [], "listformer_no_fs": ["--first-stage", "off"]}
_FIRST_STAGE = {"listformer": None, "listformer_no_fs": False}


def _caps(args) -> dict:
    return {
        "max_query_tokens": args.max_query_tokens,
        "max_document_tokens": args.max_document_tokens,
    }


def initial_scorer(args, fold_dir: str, variant: str) -> Scorer:
    """The untrained model's scorer (what training starts from)."""
    from tfr_rankformer.core.model_families import get_family
    from tfr_rankformer.core.multi_worker import WorkerRole
    from tfr_rankformer.training.train_config import TrainConfig

    settings = dict(model="listformer", data=fold_dir, model_dir="unused", **_caps(args))
    settings.update(init_from=args.init_from, first_stage=_FIRST_STAGE[variant])
    config = TrainConfig.from_flat(settings)
    family = get_family("text").load()
    run = family.prepare(config, worker=WorkerRole())
    model, _ = family.build(run, steps_per_epoch=1, xla=False)
    return ModelScorer(model, run.extra.tokenizer)


def train_variant(args, fold_dir: str, number: int, variant: str) -> dict:
    """Trains ``variant`` on the fold in a child ``tfr-train``; returns its run's figures.

    Raises:
      RuntimeError: naming the log if the training fails.
    """
    model_dir = os.path.join(args.output, "runs", f"Fold{number}", variant)
    flags = ["--model", "listformer", "--data", fold_dir, "--model-dir", model_dir]
    flags += ["--init-from", args.init_from, "--no-export", "--overwrite", *VARIANTS[variant]]
    flags += ["--evaluate-splits", "none"]  # the benchmark scores the test lists itself
    for name, value in _caps(args).items():  # the defaults, unless the benchmark's differ
        flags += ["--" + name.replace("_", "-"), str(value)]
    if args.epochs:
        flags += ["--epochs", str(args.epochs)]
    log = os.path.join(args.output, "logs", f"train_Fold{number}_{variant}.log")
    peak_file = model_dir + ".peak_rss"  # beside the run: tfr-train owns its directory
    if args.reuse_runs and os.path.isfile(os.path.join(model_dir, "metrics.json")):
        # Trained by an earlier run of the benchmark, with the peak it measured if kept.
        return _figures(model_dir, peak=_saved_peak(peak_file))
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w", encoding="utf-8") as f:
        f.write(shlex.join(["tfr-train", *flags]) + "\n")
        f.flush()
        child = subprocess.Popen(
            [sys.executable, "-m", "pipelines.train_cli", *flags],
            stdout=f,
            stderr=subprocess.STDOUT,
        )
        _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise RuntimeError(f"tfr-train failed on fold {number} ({variant}); see {log}")
    peak = usage.ru_maxrss * 1024  # Linux reports KiB
    with open(peak_file, "w", encoding="utf-8") as f:
        f.write(f"{peak}\n")
    return _figures(model_dir, peak=peak)


def _saved_peak(path: str) -> int | None:
    """The peak RSS an earlier run of the benchmark kept in ``path``, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _figures(model_dir: str, *, peak: int | None) -> dict:
    """A trained run's figures from its ``metrics.json``; ``peak``: its process's peak
    RSS in bytes (``None``: not measured, a run reused with ``--reuse-runs``)."""
    with open(os.path.join(model_dir, "metrics.json"), encoding="utf-8") as f:
        training = json.load(f)["training"]
    epochs = max(1, training["epochs_this_run"])
    return {
        "model_dir": model_dir,
        "epochs": training["epochs_completed"],
        "seconds_per_epoch": round(training["seconds"] / epochs, 1),
        "peak_rss_bytes": peak,
        "estimated_peak_bytes": training["estimated_peak_bytes"],
    }


def trained_scorer(model_dir: str) -> Scorer:
    """The trained run's scorer, with its best weights."""
    from tfr_rankformer.text.text_runs import load_text_run

    _, tokenizer, model, _ = load_text_run(model_dir)
    return ModelScorer(model, tokenizer)
