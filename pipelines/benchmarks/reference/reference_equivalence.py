"""Our models against the RankFormer authors' released code, weight for weight.

Without the randomness of ``reference_parity``: ``reference_runner.py --equivalence``
takes full-batch AdamW steps of a released model without dropout on fixed training
lists; our model of the same name gets its initial weights and takes the same steps
through our training step. The same function, loss, optimizer and schedule agree to
float32 round-off on the first outputs, each step's loss and rate, and the outputs
after the steps less their batch mean (the softmax loss ignores a shift of all scores,
so the score bias drifts apart without changing any ranking). It prints the largest
differences and exits 1 past a tolerance.

Usage::

    python -m pipelines.benchmarks.reference.reference_equivalence --dataset MQ2008 \\
        --data-dir DIR --fold 1 --output results/equivalence \\
        --official-dir rankformer-official --official-python ref-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from pipelines.benchmarks.reference.parity_sources import (
    SETUP,
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

# Largest absolute differences taken as float32 round-off (scores and logits are O(1)).
TOLERANCE = {"outputs": 1e-5, "loss": 1e-5, "rate": 1e-9, "after": 1e-3}


def released_weights(name: str, state: dict, dim: int) -> list[np.ndarray]:
    """The released ``state_dict`` arrays in the order of our ranker's
    ``trainable_weights``, in Keras's layout: ``[CLS]``, per encoder layer its norms,
    q/k/v, output and feed-forward weights, the list head, and the score head whose
    first layer splits into the item and ``[CLS]`` halves; the ``mlp``'s four layers."""

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


def _run_released(setup, files: dict, out: str, args) -> None:
    """``reference_runner.py --equivalence`` in the Python with torch (once)."""
    if all(os.path.isfile(f"{out.removesuffix('.npz')}-{m}.npz") for m in args.models):
        return
    # Two names at least, so that the runner always writes OUT-<model>.npz.
    models = args.models * 2 if len(args.models) == 1 else args.models
    options = ["--train", files["train"], "--test", files["test"], "--seed", str(args.seed)]
    options += ["--threads", "1", "--models", ",".join(models), "--equivalence", out]
    options += ["--equivalence-lists", str(args.lists), "--equivalence-steps", str(args.steps)]
    run_released(setup, options, "the released code failed")


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


def _released_batch(released: dict) -> tuple[dict, dict]:
    """The released batch as our inputs and targets (``list_quality``, each list's
    highest label ``[B, 1]``, with a list head only)."""
    import tensorflow as tf

    from tfr_rankformer.core.elwc_schema import FEATURES, MASK

    mask, label = released["mask"], released["label"]
    inputs = {FEATURES: tf.constant(released["features"]), MASK: tf.constant(mask)}
    targets = {"scores": tf.constant(label)}
    if "before/list_logits" in released:
        t = np.max(np.where(mask, label, 0.0), axis=1, keepdims=True)
        targets["list_quality"] = tf.constant(t)
    return inputs, targets


def _outputs_difference(ranker, inputs: dict, released: dict, when: str) -> float:
    """The largest |ours - released| of the scores and list logits ``before`` or
    ``after`` the steps (after them less their batch mean)."""
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
    ranker, schedule = _our_ranker(name, fold_data, seed, adam_epsilon)
    state = {k[2:]: v for k, v in released.items() if k.startswith("w/")}
    weights = released_weights(name, state, released["features"].shape[-1])
    if [tuple(w.shape) for w in ranker.trainable_weights] != [w.shape for w in weights]:
        raise ValueError(f"{name}: our weights and the released code's do not line up")
    for variable, value in zip(ranker.trainable_weights, weights):
        variable.assign(value)
    inputs, targets = _released_batch(released)
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
        cells = " | ".join(f"{r[k]:.2e}" for k in ("outputs", "loss", "rate", "after"))
        lines.append(f"| {name} | {cells} | {first} | {last} | {'yes' if agrees else 'NO'} |")
    tolerances = ", ".join(f"{k} {v:g}" for k, v in TOLERANCE.items())
    lines += ["", f"Tolerances: {tolerances}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_source_arguments(p)
    p.add_argument("--fold", type=int, default=1, help="the fold whose lists are used. Default: 1")
    p.add_argument(
        "--models",
        default=",".join(MODELS),
        help=f"comma-separated, of {', '.join(MODELS)}. Default: all",
    )
    p.add_argument(
        "--lists", type=int, default=256, help="training lists in the batch. Default: 256"
    )
    p.add_argument(
        "--steps", type=int, default=30, help="optimizer steps (one per epoch). Default: 30"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="the conversion's and the models' seed. Default: 0"
    )
    p.add_argument(
        "--adam-epsilon",
        choices=ADAM_EPSILONS,
        default="pytorch",
        help="our optimizer's epsilon placement (tfr-train --adam-epsilon). Default: pytorch",
    )
    p.add_argument("--output", required=True, help="directory for the data and the results")
    args = p.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        p.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    setup = official_setup(args)
    if setup is None:  # nothing to compare with
        print(SETUP.split(", so only our side runs")[0] + ". To run this benchmark:")
        print("\n".join(SETUP.splitlines()[1:]))
        return 2
    fold_data = convert_folds(args, [args.fold], args.seed)[args.fold]
    out = os.path.join(args.output, "released", f"Fold{args.fold}-seed{args.seed}.npz")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    _run_released(setup, shared_lists(fold_data), out, args)
    results = {}
    for name in args.models:
        with np.load(f"{out.removesuffix('.npz')}-{name}.npz") as arrays:
            released = dict(arrays)
        results[name] = compare(name, fold_data, released, args.seed, args.adam_epsilon)
    text = report(results, args)
    print(text, end="")
    with atomic_write(os.path.join(args.output, "equivalence.md")) as f:
        f.write(text)
    with atomic_write(os.path.join(args.output, "equivalence.json")) as f:
        json.dump(results, f, indent=1)
    agrees = all(r[k] <= TOLERANCE[k] for r in results.values() for k in TOLERANCE)
    return 0 if agrees else 1


if __name__ == "__main__":
    sys.exit(main())
