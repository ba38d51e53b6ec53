"""Our models against the RankFormer authors' released code, weight for weight.

``reference_parity`` compares the two code bases by their test NDCG after
training, where every random draw differs (initial weights, dropout masks,
batch order) and one fold's figure moves by a point from seed to seed. This
benchmark removes the randomness instead: ``reference_runner.py --equivalence``
builds a released model (``rankformer``, ``transformer`` or ``mlp``) with every
dropout rate set to 0 and takes full-batch AdamW steps on a fixed batch of
training lists; here our model of the same name, also without dropout, is given
the released model's initial weights and takes the same steps through its own
training step (``build_compiled_model``: our losses, loss weights, optimizer and
learning-rate schedule, one step per epoch). If the two implement the same
function, loss, optimizer and schedule, they agree to float32 round-off:

* the scores and list-head logits of the first forward pass;
* the loss before each step, and each step's learning rate (the schedule's
  decay from epoch 20 on is crossed with the default 30 steps);
* the scores and logits after the last step, the scores less their mean over
  the batch: the softmax loss does not change when every score moves by the
  same amount, so the score layer's bias has a zero gradient but for float32
  round-off, and Adam, which divides a gradient by its own magnitude, turns
  that round-off into steps of up to the learning rate: the bias drifts apart
  on the two sides (0.017 in 30 steps) without changing any ranking.

It prints one table (the largest differences) and exits 1 when a difference
exceeds its tolerance. Dropout and the random streams are the only parts of
training it does not cover.

Usage::

    python -m pipelines.benchmarks.reference.reference_equivalence --dataset MQ2008 \\
        --data-dir DIR --fold 1 --output results/equivalence \\
        --official-dir rankformer-official --official-python ref-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

from pipelines.benchmarks.reference.parity_sources import (
    RUNNER,
    SETUP,
    add_source_arguments,
    convert_folds,
    official_setup,
    shared_lists,
)
from pipelines.benchmarks.reference.reference_parity import MODELS
from pipelines.flag_table import add_flag
from tfr_rankformer.core import model_families
from tfr_rankformer.core.command_names import ADAM_EPSILONS

# Largest absolute differences taken as float32 round-off: scores and logits
# are O(1), and measured differences are some 1e-6 before training, 1e-7 on
# the losses and 1e-4 after 30 steps (with Keras's epsilon placement instead:
# 3e-4 on the losses and 0.26 after 30 steps).
TOLERANCE = {"outputs": 1e-5, "loss": 1e-5, "rate": 1e-9, "after": 1e-3}


def released_weights(name: str, state: dict, dim: int) -> list[np.ndarray]:
    """The released model's ``state_dict`` arrays (``state``: key -> array) in the
    order of our ranker's ``trainable_weights``, transposed to Keras's layout.

    Ours: ``[CLS]`` (``rankformer``), then per encoder layer LayerNorm, the
    joint q/k/v projection, the attention's output projection, LayerNorm and
    the two feed-forward layers; then the list head (``rankformer``) and the
    score head, whose first layer ``ItemAndContextHead`` splits into the item
    and ``[CLS]`` halves. The ``mlp`` is its four linear layers.
    """

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


def run_released(setup, files: dict, out: str, args) -> None:
    """``reference_runner.py --equivalence`` in the Python with torch (once)."""
    if all(os.path.isfile(f"{out.removesuffix('.npz')}-{m}.npz") for m in args.models):
        return
    directory, python = setup
    command = [python, RUNNER, "--official-dir", directory, "--train", files["train"]]
    command += ["--test", files["test"], "--seed", str(args.seed), "--threads", "1"]
    command += ["--models", ",".join(args.models), "--equivalence", out]
    command += ["--equivalence-lists", str(args.lists), "--equivalence-steps", str(args.steps)]
    # Two names at least, so that the runner always writes OUT-<model>.npz.
    if len(args.models) == 1:
        command[command.index("--models") + 1] += "," + args.models[0]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the released code failed:\n{done.stderr[-2000:]}")


def _our_ranker(name: str, fold_data: str, seed: int, adam_epsilon: str) -> tuple:
    """Our compiled ``name`` without dropout, one step per epoch, seeded with ``seed``;
    and its optimizer's learning-rate schedule."""
    import tensorflow as tf

    from tfr_rankformer.inputs.data import load_manifest
    from tfr_rankformer.training.optimizers import learning_rate_schedule
    from tfr_rankformer.training.train_config import TrainConfig
    from tfr_rankformer.training.training_setup import build_compiled_model

    tf.keras.utils.set_random_seed(seed)
    config = TrainConfig.from_json(
        {
            "model": name,
            "data": fold_data,
            "model_dir": os.devnull,
            "seed": seed,
            "adam_epsilon": adam_epsilon,
            "architecture": {"dropout": 0.0},
        }
    )
    _, ranker = build_compiled_model(config, load_manifest(fold_data), steps_per_epoch=1, xla=False)
    return ranker, learning_rate_schedule(config, steps_per_epoch=1)  # the optimizer's


def _take_released_weights(name: str, ranker, released: dict) -> None:
    """Gives ``ranker`` the released model's initial weights (``released``'s ``w/...``)."""
    state = {k[2:]: v for k, v in released.items() if k.startswith("w/")}
    weights = released_weights(name, state, released["features"].shape[-1])
    ours = ranker.trainable_weights
    if [tuple(w.shape) for w in ours] != [w.shape for w in weights]:
        raise ValueError(f"{name}: our weights and the released code's do not line up")
    for variable, value in zip(ours, weights):
        variable.assign(value)


def _released_batch(released: dict) -> tuple[dict, dict]:
    """The released batch as our model's inputs and targets; ``list_quality`` (each
    list's highest label t, ``[B, 1]``) only when the released model has a list head."""
    import tensorflow as tf

    from tfr_rankformer.core.elwc_schema import FEATURES
    from tfr_rankformer.inputs.data import MASK

    mask, label = released["mask"], released["label"]
    inputs = {FEATURES: tf.constant(released["features"]), MASK: tf.constant(mask)}
    targets = {"scores": tf.constant(label)}
    if "before/list_logits" in released:
        t = np.max(np.where(mask, label, 0.0), axis=1, keepdims=True)
        targets["list_quality"] = tf.constant(t)
    return inputs, targets


def _outputs_difference(ranker, inputs: dict, released: dict, when: str) -> float:
    """The largest |ours - released| of the scores and list logits ``before`` or
    ``after`` the steps (the scores after them less their mean over the batch)."""
    mask = released["mask"]
    found = ranker(inputs, training=True)
    ours, theirs = found["scores"].numpy()[mask], released[f"{when}/scores"][mask]
    if when == "after":  # without the shift no loss sees (see the module docstring)
        ours, theirs = ours - ours.mean(), theirs - theirs.mean()
    gaps = [np.abs(ours - theirs).max()]
    if f"{when}/list_logits" in released:
        gaps.append(np.abs(found["list_quality"].numpy() - released[f"{when}/list_logits"]).max())
    return float(max(gaps))


def compare(
    name: str, fold_data: str, released: dict, seed: int, adam_epsilon: str = "pytorch"
) -> dict:
    """Our ``name`` with the released initial weights, stepped as the released one
    was; the largest differences to it."""
    ranker, schedule = _our_ranker(name, fold_data, seed, adam_epsilon)
    _take_released_weights(name, ranker, released)
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
    add_flag(p, "fold", default=1, help="the fold whose training lists are used")
    add_flag(
        p,
        "models",
        default=",".join(MODELS),
        help=f"comma-separated, of {', '.join(MODELS)}. Default: all",
    )
    add_flag(p, "lists", default=256, help="training lists in the batch")
    add_flag(p, "steps", default=30, help="optimizer steps (one per epoch). Default: 30")
    add_flag(p, "seed", default=0, help="the conversion's and the models' seed")
    add_flag(
        p,
        "adam_epsilon",
        choices=ADAM_EPSILONS,
        default="pytorch",
        help="our optimizer's epsilon placement (tfr-train --adam-epsilon). Default: pytorch",
    )
    add_flag(p, "output", required=True, help="directory for the data and the results")
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
    run_released(setup, shared_lists(fold_data), out, args)
    results = {}
    for name in args.models:
        with np.load(f"{out.removesuffix('.npz')}-{name}.npz") as arrays:
            released = dict(arrays)
        results[name] = compare(name, fold_data, released, args.seed, args.adam_epsilon)
    text = report(results, args)
    print(text, end="")
    with open(os.path.join(args.output, "equivalence.md"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(args.output, "equivalence.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    agrees = all(r[k] <= TOLERANCE[k] for r in results.values() for k in TOLERANCE)
    return 0 if agrees else 1


if __name__ == "__main__":
    sys.exit(main())
