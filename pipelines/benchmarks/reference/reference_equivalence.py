"""Our models against the RankFormer authors' released code, weight for weight.

Our model of a released model's name takes its initial weights and the same full-batch
AdamW steps without dropout (``reference_runner.py --equivalence``); the first outputs,
each step's loss and rate, and the outputs after the steps less their batch mean (the
softmax loss ignores a shift of all scores) must agree to float32 round-off, or it exits 1.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from pipelines.benchmarks.bench_support import names_of, parser
from pipelines.benchmarks.reference.parity_sources import (
    add_source_arguments,
    convert_folds,
    official_setup,
    run_released,
    shared_lists,
)
from pipelines.benchmarks.reference.reference_parity import MODELS
from tfr_rankformer.core import model_families
from tfr_rankformer.core.atomic_files import atomic_write
from tfr_rankformer.core.command_names import ADAM_EPSILONS
from tfr_rankformer.core.config_io import write_json

# Largest absolute differences taken as float32 round-off (scores and logits are O(1)).
TOLERANCE = {"outputs": 1e-5, "loss": 1e-5, "rate": 1e-9, "after": 1e-3}


def released_weights(name: str, state: dict, dim: int) -> list[np.ndarray]:
    """The released ``state_dict`` in the order and layout of our ``trainable_weights``."""

    def linear(prefix: str) -> list[np.ndarray]:
        return [state[f"{prefix}.weight"].T, state[f"{prefix}.bias"]]

    spec = model_families.get_model(name)
    if not spec.attention:  # the released MLP
        return [w for i in (0, 3, 6, 9) for w in linear(f"net.{i}")]
    weights = []
    if spec.has_list_head:  # the released RankFormer with list_pred_strength > 0
        weights.append(state["list_emb.weight"].reshape(1, 1, dim))
    layers = sorted({int(k.split(".")[2]) for k in state if k.startswith("transformer.layers.")})
    for i in layers:
        p = f"transformer.layers.{i}"
        weights += [state[f"{p}.norm1.weight"], state[f"{p}.norm1.bias"]]
        weights += [state[f"{p}.self_attn.in_proj_weight"].T, state[f"{p}.self_attn.in_proj_bias"]]
        weights += linear(f"{p}.self_attn.out_proj")
        weights += [state[f"{p}.norm2.weight"], state[f"{p}.norm2.bias"]]
        weights += linear(f"{p}.linear1") + linear(f"{p}.linear2")
    if spec.has_list_head:
        weights += linear("list_score_net.net.0") + linear("list_score_net.net.3")
        hidden = state["rank_score_net.net.0.weight"]  # [h, 2d] on [z_i, z_CLS]
        weights += [hidden[:, :dim].T, hidden[:, dim:].T, state["rank_score_net.net.0.bias"]]
    else:
        weights += linear("rank_score_net.net.0")
    return weights + linear("rank_score_net.net.3")


def _our_ranker(name: str, fold_data: str, seed: int, adam_epsilon: str) -> tuple:
    """Our compiled ``name`` without dropout, one step per epoch, and its schedule."""
    import tensorflow as tf

    from tfr_rankformer.inputs.manifest import load_manifest
    from tfr_rankformer.training.optimizers import learning_rate_schedule
    from tfr_rankformer.training.train_config import TrainConfig
    from tfr_rankformer.training.training_setup import build_compiled_model

    tf.keras.utils.set_random_seed(seed)
    values = dict(model=name, data=fold_data, model_dir=os.devnull, seed=seed)
    values.update(adam_epsilon=adam_epsilon, architecture={"dropout": 0.0})
    config = TrainConfig.from_json(values)
    _, ranker = build_compiled_model(config, load_manifest(fold_data), steps_per_epoch=1, xla=False)
    return ranker, learning_rate_schedule(config, steps_per_epoch=1)  # the optimizer's


def _outputs_difference(ranker, inputs: dict, released: dict, when: str) -> float:
    """The largest |ours - released| of the outputs ``before`` or ``after`` the steps."""
    mask = released["mask"]
    found = ranker(inputs, training=True)
    ours, theirs = found["scores"].numpy()[mask], released[f"{when}/scores"][mask]
    if when == "after":  # without the shift no loss sees
        ours, theirs = ours - ours.mean(), theirs - theirs.mean()
    gaps = [np.abs(ours - theirs).max()]
    if f"{when}/list_logits" in released:
        gaps.append(np.abs(found["list_quality"].numpy() - released[f"{when}/list_logits"]).max())
    return float(max(gaps))


def compare(
    name: str, fold_data: str, released: dict, seed: int, adam_epsilon: str = "pytorch"
) -> dict:
    """Our ``name`` from the released weights, stepped as it was; the largest differences."""
    import tensorflow as tf

    from tfr_rankformer.core.elwc_schema import FEATURES, MASK

    ranker, schedule = _our_ranker(name, fold_data, seed, adam_epsilon)
    state = {k[2:]: v for k, v in released.items() if k.startswith("w/")}
    weights = released_weights(name, state, released["features"].shape[-1])
    if [tuple(w.shape) for w in ranker.trainable_weights] != [w.shape for w in weights]:
        raise ValueError(f"{name}: our weights and the released code's do not line up")
    for variable, value in zip(ranker.trainable_weights, weights):
        variable.assign(value)
    mask, label = released["mask"], released["label"]
    inputs = {FEATURES: tf.constant(released["features"]), MASK: tf.constant(mask)}
    targets = {"scores": tf.constant(label)}
    if "before/list_logits" in released:  # with a list head
        t = np.max(np.where(mask, label, 0.0), axis=1, keepdims=True)
        targets["list_quality"] = tf.constant(t)
    before = _outputs_difference(ranker, inputs, released, "before")
    losses, rates = [], []
    for _ in range(len(released["losses"])):
        rates.append(float(schedule(ranker.optimizer.iterations)))
        losses.append(ranker.train_on_batch(inputs, targets, return_dict=True)["loss"])
    return {
        "outputs": before,
        "loss": float(np.abs(np.array(losses) - released["losses"]).max()),
        "rate": float(np.abs(np.array(rates) - released["rates"]).max()),
        "after": _outputs_difference(ranker, inputs, released, "after"),
        "first loss": (float(losses[0]), float(released["losses"][0])),
        "last loss": (float(losses[-1]), float(released["losses"][-1])),
    }


def report(results: dict, args) -> str:
    lines = [
        f"{args.dataset} Fold{args.fold}: {args.lists} training lists, {args.steps} full-batch "
        "steps, no dropout, the released model's initial weights (seed "
        f"{args.seed}); largest |ours − released|",
        "",
        "| model | first pass scores/logits | loss per step | learning rate | "
        f"outputs after {args.steps} steps | first loss (ours, released) | last loss | agrees |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        agrees = all(r[k] <= TOLERANCE[k] for k in TOLERANCE)
        first = "{:.6f}, {:.6f}".format(*r["first loss"])
        last = "{:.6f}, {:.6f}".format(*r["last loss"])
        cells = " | ".join(f"{r[k]:.2e}" for k in TOLERANCE)
        lines.append(f"| {name} | {cells} | {first} | {last} | {'yes' if agrees else 'NO'} |")
    tolerances = ", ".join(f"{k} {v:g}" for k, v in TOLERANCE.items())
    lines += ["", f"Tolerances: {tolerances}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    add_source_arguments(p)
    add = p.add_argument
    add("--fold", type=int, default=1, help="the fold whose lists are used")
    add("--models", type=names_of(MODELS), default=",".join(MODELS), help="comma-separated")
    add("--lists", type=int, default=256, help="training lists in the batch")
    add("--steps", type=int, default=30, help="optimizer steps (one per epoch)")
    add("--seed", type=int, default=0, help="the conversion's and the models' seed")
    add("--adam-epsilon", choices=ADAM_EPSILONS, default="pytorch", help="as tfr-train's")
    add("--output", required=True, help="directory for the data and the results")
    args = p.parse_args(argv)
    setup = official_setup(args)
    if setup is None:  # nothing to compare with
        return 2
    fold_data = convert_folds(args, [args.fold], args.seed)[args.fold]
    out = os.path.join(args.output, "released", f"Fold{args.fold}-seed{args.seed}")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if not all(os.path.isfile(f"{out}-{m}.npz") for m in args.models):  # the released side once
        files = shared_lists(fold_data)
        options = ["--train", files["train"], "--test", files["test"], "--seed", str(args.seed)]
        options += ["--threads", "1", "--models", ",".join(args.models), "--equivalence", out]
        options += ["--equivalence-lists", str(args.lists), "--equivalence-steps", str(args.steps)]
        run_released(setup, options, "the released code failed")
    results = {}
    for name in args.models:
        with np.load(f"{out}-{name}.npz") as arrays:
            released = dict(arrays)
        results[name] = compare(name, fold_data, released, args.seed, args.adam_epsilon)
    text = report(results, args)
    print(text, end="")
    with atomic_write(os.path.join(args.output, "equivalence.md")) as f:
        f.write(text)
    write_json(os.path.join(args.output, "equivalence.json"), results)
    agrees = all(r[k] <= TOLERANCE[k] for r in results.values() for k in TOLERANCE)
    return 0 if agrees else 1


if __name__ == "__main__":
    sys.exit(main())
