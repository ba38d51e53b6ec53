"""Trains the RankFormer authors' released PyTorch models on one LETOR fold.

Run by ``reference_parity`` with a Python that has torch, pandas and
scikit-learn (the released code's requirements), never imported by this
project: it imports the released modules (``model``, ``ltr_dataset``,
``metrics``, ``label_simulation``) from ``--official-dir``, a checkout of
github.com/maartenbuyl/rankformer, and drives them the way that repository's
``main.py`` does:

* labels: its ``UserModel`` click simulation (16 items seen, 10 bootstraps,
  click noise 0.1, kappa 0.1; a purchase is label 4 in that code), on train
  and test alike; or, given ``.npz`` lists (``--train lists/train.npz``), the
  lists and labels in them as they are: the clicks our conversion simulated,
  so both sides train and test on the very same lists;
* features: scikit-learn's ``QuantileTransformer(output_distribution="normal")``
  fitted on the simulated training lists;
* training: AdamW (rate 1e-3, weight decay 0.1), batches of 2048 lists in a
  shuffled order, the rate multiplied by ``(epoch - 19) ** -0.5`` from epoch 20
  on (a ``LambdaLR`` stepped per epoch), the last epoch's weights tested;
* models: ``rankformer`` (``list_pred_strength`` 1, the script's own),
  ``transformer`` (strength 0) and ``mlp`` ([512, 256, 128]), all with the
  paper's encoder (3 layers, 1 head, feed-forward 512, dropout 0.25, heads of
  128);
* metrics: its own ``NDCG(k=10)`` on the simulated and the explicit labels and
  ``TopNDCG`` (lists whose label reaches the highest level).

Prints one JSON object per line: first the data's sizes, then one per model.
With ``--click-stats N`` it trains nothing: it draws the click simulation N
times on ``--train`` (seeds ``--seed`` ..) and prints each draw's
:func:`list_stats` (``click_parity`` compares them with ours).

Usage::

    python reference_runner.py --official-dir DIR --train Fold1/train.txt \\
        --test Fold1/test.txt [--epochs 30] [--seed 0] [--models rankformer,transformer,mlp]

An ``.npz`` of lists holds ``features`` (``[items, d]``, raw values), ``label``
(the training label y per item), ``relevance`` (the explicit label r) and
``offsets`` (``[lists + 1]``: list i is items ``offsets[i]:offsets[i + 1]``).
The readers of both inputs and :func:`list_stats` are in ``reference_lists.py``
and the options in ``reference_runner_options.py``, beside this file: the script
imports them from its own directory.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

try:  # imported as pipelines.benchmarks.reference.reference_runner
    from .reference_lists import list_stats, read_letor, read_lists
    from .reference_runner_options import build_parser
except ImportError:  # run as a script (or imported from its directory): sibling modules
    from reference_lists import list_stats, read_letor, read_lists
    from reference_runner_options import build_parser

# Our model names as the released code builds them: its RankFormer's list
# prediction strength (alpha), or ``None`` for its MLP. This script runs in the
# released code's environment, without tfr_rankformer's registry.
_RELEASED_STRENGTH = {"rankformer": 1.0, "transformer": 0.0, "mlp": None}
MODELS = tuple(_RELEASED_STRENGTH)
_USER_MODEL = dict(
    seen_max=16, seen_bootstrap=10, click_noise=0.1, purchase_intent_kappa=0.1, purchase_noise=0.0
)


def click_stats(path: str, *, draws: int, seed: int) -> None:
    """Prints :func:`list_stats` of ``draws`` runs of the released click simulation."""
    import numpy as np
    from label_simulation import UserModel

    for draw_seed in range(seed, seed + draws):
        frame = read_letor(path).sort_values(by="qid", kind="stable")
        lists = UserModel("target", "qid", **_USER_MODEL).apply(frame, seed=draw_seed)
        lists = lists.sort_values(by="qid", kind="stable")
        qid = lists["qid"].to_numpy()
        offsets = np.r_[0, np.flatnonzero(np.diff(qid)) + 1, len(qid)]
        stats = list_stats(lists["implicit_target"], lists["explicit_target"], offsets)
        print(json.dumps({"seed": draw_seed, **stats}), flush=True)


def build(name: str, input_dim: int, max_target: int):
    from model import MLP, RankFormer

    strength = _RELEASED_STRENGTH[name]
    if strength is None:
        return MLP(input_dim=input_dim, hidden_layers=[512, 256, 128], dropout=0.25)
    return RankFormer(
        input_dim=input_dim,
        max_target=max_target,
        tf_dim_feedforward=512,
        tf_nhead=1,
        tf_num_layers=3,
        head_hidden_layers=[128],
        dropout=0.25,
        list_pred_strength=strength,
    )


def _optimizer(model) -> tuple:
    """The released training's AdamW (rate 1e-3, weight decay 0.1) and its schedule:
    the rate times ``(epoch - 19) ** -0.5`` from epoch 20 on, stepped per epoch."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda epoch: 1.0 if epoch < 20 else (epoch - 19) ** -0.5
    )
    return optimizer, schedule


def evaluate(model, test, max_target: int, batch_size: int = 2048) -> dict:
    import torch
    from ltr_dataset import LearningToRankDataset
    from metrics import NDCG, TopNDCG

    metrics = {
        "ndcg_y@10": NDCG(k=10),
        "ndcg_r@10": NDCG(k=10),
        "ndcg_y@10_tmax": TopNDCG(max_target=max_target, k=10),
    }
    loader = torch.utils.data.DataLoader(
        test, batch_size=batch_size, shuffle=False, collate_fn=LearningToRankDataset.collate_fn
    )
    model.eval()
    with torch.no_grad():
        for batch in loader:
            scores = model(batch["feat"], batch["length"])
            scores = scores[0] if isinstance(scores, tuple) else scores
            metrics["ndcg_y@10"].update(scores, batch["target"], batch["length"])
            metrics["ndcg_y@10_tmax"].update(scores, batch["target"], batch["length"])
            metrics["ndcg_r@10"].update(scores, batch["explicit_target"], batch["length"])
    return {key: 100.0 * float(metric.compute()) for key, metric in metrics.items()}


def train(
    name: str, train_set, test_set, *, epochs: int, seed: int, curve: int = 0, batch_size=2048
) -> dict:
    """Trains ``name`` and tests its last weights; with ``curve`` N > 0 it also
    prints the test metrics after every N-th epoch, and the epoch's mean
    training loss (its batches' losses weighted by their lists, as Keras's
    ``loss`` in our ``history.csv``), as ``{"curve_of": name, "epoch": e,
    "train_loss": ..., ...}`` lines (no ``model`` key: they are not results)."""
    import torch
    from ltr_dataset import LearningToRankDataset

    torch.manual_seed(seed)
    model = build(name, train_set.input_dim, train_set.max_target)
    optimizer, schedule = _optimizer(model)
    loader = torch.utils.data.DataLoader(
        train_set, batch_size=batch_size, shuffle=True, collate_fn=LearningToRankDataset.collate_fn
    )
    rates = []
    started = time.perf_counter()
    for epoch in range(epochs):
        model.train()
        epoch_start, lists, loss_sum = time.perf_counter(), 0, 0.0
        for batch in loader:
            optimizer.zero_grad()
            scores = model(batch["feat"], batch["length"])
            loss = model.compute_loss(scores, batch["target"], batch["length"])
            loss.backward()
            optimizer.step()
            lists += len(batch["length"])
            loss_sum += loss.item() * len(batch["length"])
        schedule.step()
        rates.append(lists / (time.perf_counter() - epoch_start))
        if curve and (epoch + 1) % curve == 0 and epoch + 1 < epochs:
            # A DataLoader draws its base seed from torch's generator: restoring
            # the state keeps the training run the same as without --curve.
            state = torch.get_rng_state()
            point = evaluate(model, test_set, train_set.max_target, batch_size)
            torch.set_rng_state(state)
            point["train_loss"] = loss_sum / lists
            print(json.dumps({"curve_of": name, "epoch": epoch + 1, **point}), flush=True)
    return {
        "model": name,
        "epochs": epochs,
        "seed": seed,
        "train_seconds": time.perf_counter() - started,
        "lists_per_sec": statistics.median(rates),
        "batch_size": batch_size,
        **evaluate(model, test_set, train_set.max_target, batch_size),
    }


def _padded_outputs(outputs, length, width: int, when: str) -> dict:
    """A released model's outputs as ``{when/scores: [B, L] (0 for padding),
    when/list_logits: [B, K]}`` (the latter only from a model with a list head)."""
    import numpy as np

    scores = outputs[0] if isinstance(outputs, tuple) else outputs
    flat, start = scores.detach().numpy().reshape(-1), 0
    padded = np.zeros((len(length), width), np.float32)
    for i, n in enumerate(length.tolist()):
        padded[i, :n] = flat[start : start + n]
        start += n
    found = {f"{when}/scores": padded}
    if isinstance(outputs, tuple):
        found[f"{when}/list_logits"] = outputs[1].detach().numpy()
    return found


def _without_dropout(model) -> None:
    """Sets every dropout rate of ``model`` to 0: the two sides would draw different masks."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(module, torch.nn.MultiheadAttention):
            module.dropout = 0.0


def _first_lists(train_set, lists: int) -> tuple:
    """The first ``lists`` training lists, flat as the released model takes them
    (``feat`` ``[items, d]``, ``target`` ``[items]``, ``length`` ``[B]``) and padded
    (``features`` ``[B, L, d]`` float32, ``label`` ``[B, L]`` with -1 for padding)."""
    import numpy as np

    end = int(train_set.cum_length[lists - 1])
    length = train_set.length[:lists]
    feat, target = train_set.feat[:end], train_set.target[:end]
    width = int(length.max())
    features = np.zeros((lists, width, train_set.input_dim), np.float32)
    label = np.full((lists, width), -1.0, np.float32)
    start = 0
    for i, n in enumerate(length.tolist()):
        features[i, :n] = feat[start : start + n].numpy()
        label[i, :n] = target[start : start + n].numpy()
        start += n
    return feat, target, length, features, label


def _full_batch_steps(model, feat, target, length, *, width: int, steps: int) -> tuple:
    """``steps`` AdamW steps on the whole batch, the schedule stepped after each (as
    after an epoch). Returns the first forward pass's padded outputs (``before/...``),
    the loss before each step and each step's learning rate."""
    optimizer, schedule = _optimizer(model)
    model.train()
    before, losses, rates = {}, [], []
    for step in range(steps):
        optimizer.zero_grad()
        outputs = model(feat, length)
        if step == 0:
            before = _padded_outputs(outputs, length, width, "before")
        loss = model.compute_loss(outputs, target, length)
        losses.append(float(loss))
        rates.append(optimizer.param_groups[0]["lr"])
        loss.backward()
        optimizer.step()
        schedule.step()
    return before, losses, rates


def equivalence(name: str, train_set, out: str, *, lists: int, steps: int, seed: int) -> None:
    """Writes to ``out`` (``.npz``) what ``reference_equivalence`` compares: the
    released ``name`` model built with ``seed`` and every dropout rate set to 0,
    its initial weights (``w/<state_dict key>``), the first ``lists`` training
    lists as a padded batch of transformed features (``features`` ``[B, L, d]``,
    ``mask``, ``label`` with -1 for padding), the outputs of the first forward
    pass (``before/scores`` ``[B, L]``, ``before/list_logits`` ``[B, K]``), the loss before each
    of ``steps`` full-batch AdamW steps (``losses``), the learning rate of each
    step (``rates``; the schedule steps after each, as after an epoch), and the
    weights and outputs after them (``after/<key>``, ``after/scores``, ...)."""
    import numpy as np
    import torch

    torch.manual_seed(seed)
    model = build(name, train_set.input_dim, train_set.max_target)
    _without_dropout(model)
    arrays = {f"w/{k}": v.detach().numpy().copy() for k, v in model.state_dict().items()}
    feat, target, length, features, label = _first_lists(train_set, lists)
    width = features.shape[1]
    before, losses, rates = _full_batch_steps(model, feat, target, length, width=width, steps=steps)
    arrays.update(before)
    with torch.no_grad():
        arrays.update(_padded_outputs(model(feat, length), length, width, "after"))
    arrays.update({f"after/{k}": v.detach().numpy() for k, v in model.state_dict().items()})
    arrays.update(
        features=features,
        mask=label >= 0,
        label=label,
        losses=np.array(losses),
        rates=np.array(rates),
    )
    np.savez(out, **arrays)
    print(json.dumps({"equivalence": name, "lists": lists, "steps": steps, "out": out}))


def load_sets(args) -> dict:
    """The ``train`` and ``test`` datasets of the released code (``--official-dir``
    on ``sys.path``): its quantile transform fitted on train, LETOR files' clicks
    simulated by its ``UserModel``, ``.npz`` lists taken as they are. Prints their sizes."""
    import numpy as np
    import torch
    from ltr_dataset import LearningToRankDataset
    from sklearn.preprocessing import QuantileTransformer

    torch.set_num_threads(args.threads)
    np.random.seed(args.seed)
    transform = QuantileTransformer(output_distribution="normal", random_state=args.seed)
    started = time.perf_counter()
    sets = {}
    for split in ("train", "test"):  # train first: it fits the transform
        path = getattr(args, split)
        if path.endswith(".npz"):  # lists with their labels: nothing is simulated
            frame, user_model = read_lists(path), None
        else:
            frame, user_model = read_letor(path), _USER_MODEL
        sets[split] = LearningToRankDataset(
            frame, "target", "qid", transform, user_model, seed=args.seed
        )
    sizes = {split: len(dataset) for split, dataset in sets.items()}
    print(
        json.dumps(
            {
                "lists": sizes,
                "input_dim": sets["train"].input_dim,
                "max_target": sets["train"].max_target,
                "load_seconds": time.perf_counter() - started,
            }
        ),
        flush=True,
    )
    return sets


def _write_equivalences(names: list[str], train_set, args) -> None:
    """``--equivalence``: one ``.npz`` per model (``OUT-<model>.npz`` with several)."""
    for name in names:
        out = args.equivalence
        if len(names) > 1:
            out = out.removesuffix(".npz") + f"-{name}.npz"
        equivalence(
            name,
            train_set,
            out,
            lists=args.equivalence_lists,
            steps=args.equivalence_steps,
            seed=args.seed,
        )


def _train_all(names: list[str], sets: dict, args) -> None:
    """Trains and tests every model in turn, printing each one's result line."""
    for name in names:
        result = train(
            name,
            sets["train"],
            sets["test"],
            epochs=args.epochs,
            seed=args.seed,
            curve=args.curve,
            batch_size=args.batch_size,
        )
        print(json.dumps(result), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(__doc__.split("\n\n")[0], MODELS)
    args = parser.parse_args(argv)
    if args.click_stats:
        sys.path.insert(0, args.official_dir)
        click_stats(args.train, draws=args.click_stats, seed=args.seed)
        return 0
    if args.test is None:
        parser.error("--test is needed to train")
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    sys.path.insert(0, args.official_dir)
    sets = load_sets(args)
    if args.equivalence:
        _write_equivalences(names, sets["train"], args)
    else:
        _train_all(names, sets, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
