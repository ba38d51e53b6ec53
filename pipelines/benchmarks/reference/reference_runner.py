"""Trains the RankFormer authors' released PyTorch models on one LETOR fold, or times them.

Run under a Python with torch, pandas and scikit-learn (it imports nothing of this project),
as the released ``main.py`` drives its modules; ``.npz`` lists replace its ``UserModel``
clicks. Prints a JSON line of the data's sizes, then one per model. ``--time-steps``
(``train_bench``) steps one batch of random lists: it prints ``{"ready": ...}``, then answers
each input line ``STEPS n`` with ``{"seconds": [...]}`` until ``QUIT``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

# Our model names as the released code builds them: its RankFormer's list prediction
# strength, or ``None`` for its MLP.
_RELEASED_STRENGTH = {"rankformer": 1.0, "transformer": 0.0, "mlp": None}
MODELS = tuple(_RELEASED_STRENGTH)
_USER_MODEL = dict(
    seen_max=16, seen_bootstrap=10, click_noise=0.1, purchase_intent_kappa=0.1, purchase_noise=0.0
)


def _frame(features, **columns):
    """The released dataset's DataFrame: ``columns``, then ``f0001`` .. one per feature."""
    import pandas as pd

    names = [f"f{i:04d}" for i in range(1, features.shape[1] + 1)]
    return pd.concat([pd.DataFrame(columns), pd.DataFrame(features, columns=names)], axis=1)


def read_letor(path: str):
    """A LETOR file (or ``.gz``) as ``target``, ``qid`` and the features (absent ones 0)."""
    from sklearn.datasets import load_svmlight_file

    features, labels, qids = load_svmlight_file(path, query_id=True, zero_based=False)
    return _frame(features.toarray(), target=labels.astype(int), qid=qids)


def read_lists(path: str):
    """``.npz`` lists as ``target`` (y), ``explicit_target`` (r), ``qid`` (the list's index)."""
    import numpy as np

    with np.load(path) as arrays:
        offsets, label, relevance = arrays["offsets"], arrays["label"], arrays["relevance"]
        features = arrays["features"].astype(np.float64)
    qid = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    target, explicit = label.astype(np.int64), relevance.astype(np.int64)
    return _frame(features, target=target, explicit_target=explicit, qid=qid)


def list_stats(label, relevance, offsets) -> dict:
    """Shares of lists by best y and best r, clicks, purchases and items per list."""
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
    """The released model ``name`` with the paper's settings."""
    from model import MLP, RankFormer

    strength = _RELEASED_STRENGTH[name]
    if strength is None:
        return MLP(input_dim=input_dim, hidden_layers=[512, 256, 128], dropout=0.25)
    paper = dict(tf_dim_feedforward=512, tf_nhead=1, tf_num_layers=3, head_hidden_layers=[128])
    return RankFormer(
        input_dim, max_target=max_target, dropout=0.25, list_pred_strength=strength, **paper
    )


def _optimizer(model) -> tuple:
    """The released AdamW and its schedule, stepped per epoch."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda epoch: 1.0 if epoch < 20 else (epoch - 19) ** -0.5
    )
    return optimizer, schedule


def _step(model, optimizer, feat, target, length) -> float:
    """One training step of the released code's loop; its loss."""
    optimizer.zero_grad()
    loss = model.compute_loss(model(feat, length), target, length)
    loss.backward()
    optimizer.step()
    return float(loss)


def _loader(dataset, batch_size: int, shuffle: bool):
    import torch
    from ltr_dataset import LearningToRankDataset

    collate = LearningToRankDataset.collate_fn
    return torch.utils.data.DataLoader(dataset, batch_size, shuffle=shuffle, collate_fn=collate)


def evaluate(model, test, max_target: int, batch_size: int = 2048) -> dict:
    import torch
    from metrics import NDCG, TopNDCG

    metrics = {"ndcg_y@10": (NDCG(k=10), "target"), "ndcg_r@10": (NDCG(k=10), "explicit_target")}
    metrics["ndcg_y@10_tmax"] = TopNDCG(max_target=max_target, k=10), "target"
    model.eval()
    with torch.no_grad():
        for batch in _loader(test, batch_size, shuffle=False):
            scores = model(batch["feat"], batch["length"])
            scores = scores[0] if isinstance(scores, tuple) else scores
            for metric, target in metrics.values():
                metric.update(scores, batch[target], batch["length"])
    return {key: 100.0 * float(metric.compute()) for key, (metric, _) in metrics.items()}


def train(name: str, train_set, test_set, *, epochs: int, seed: int, batch_size=2048) -> dict:
    """Trains ``name`` and tests its last weights."""
    import torch

    torch.manual_seed(seed)
    model = build(name, train_set.input_dim, train_set.max_target)
    optimizer, schedule = _optimizer(model)
    loader = _loader(train_set, batch_size, shuffle=True)
    rates = []
    started = time.perf_counter()
    for _ in range(epochs):
        model.train()
        epoch_start, lists = time.perf_counter(), 0
        for batch in loader:
            _step(model, optimizer, batch["feat"], batch["target"], batch["length"])
            lists += len(batch["length"])
        schedule.step()
        rates.append(lists / (time.perf_counter() - epoch_start))
    return {
        "model": name,
        "epochs": epochs,
        "seed": seed,
        "train_seconds": time.perf_counter() - started,
        "lists_per_sec": statistics.median(rates),
        "batch_size": batch_size,
        **evaluate(model, test_set, train_set.max_target, batch_size),
    }


def _pad(flat, length, fill: float):
    """Flat items ``[items, ...]`` of lists of ``length`` as ``[lists, longest, ...]``."""
    import torch

    parts = torch.split(torch.as_tensor(flat).float(), length.tolist())
    return torch.nn.utils.rnn.pad_sequence(parts, batch_first=True, padding_value=fill).numpy()


def _padded_outputs(outputs, length, when: str) -> dict:
    """``{when/scores: [B, L] (0 for padding), when/list_logits: [B, K]}`` (with a list head)."""
    scores = outputs[0] if isinstance(outputs, tuple) else outputs
    found = {f"{when}/scores": _pad(scores.detach().reshape(-1), length, 0.0)}
    if isinstance(outputs, tuple):
        found[f"{when}/list_logits"] = outputs[1].detach().numpy()
    return found


def equivalence(name: str, train_set, out: str, *, lists: int, steps: int, seed: int) -> None:
    """Writes to ``out`` (``.npz``) what ``reference_equivalence`` compares: ``name`` without
    dropout, its first weights, lists and outputs, and ``steps`` full-batch steps' losses."""
    import numpy as np
    import torch

    torch.manual_seed(seed)
    model = build(name, train_set.input_dim, train_set.max_target)
    for module in model.modules():  # the two sides would draw different masks
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(module, torch.nn.MultiheadAttention):
            module.dropout = 0.0
    arrays = {f"w/{k}": v.detach().numpy().copy() for k, v in model.state_dict().items()}
    end = int(train_set.cum_length[lists - 1])
    length = train_set.length[:lists]
    feat, target = train_set.feat[:end], train_set.target[:end]
    label = _pad(target, length, -1.0)
    optimizer, schedule = _optimizer(model)
    model.train()
    with torch.no_grad():
        arrays.update(_padded_outputs(model(feat, length), length, "before"))
    losses, rates = [], []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        losses.append(_step(model, optimizer, feat, target, length))
        schedule.step()
    with torch.no_grad():
        arrays.update(_padded_outputs(model(feat, length), length, "after"))
    arrays.update({f"after/{k}": v.detach().numpy() for k, v in model.state_dict().items()})
    arrays.update(features=_pad(feat, length, 0.0), mask=label >= 0, label=label)
    np.savez(out, losses=np.array(losses), rates=np.array(rates), **arrays)
    print(json.dumps({"equivalence": name, "lists": lists, "steps": steps, "out": out}))


def time_steps(args) -> None:
    """``--time-steps``: the released model's training steps on one random batch, on request."""
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = build(args.models, args.features, args.max_label)
    optimizer, _ = _optimizer(model)
    items = args.batch_size * args.items
    features = torch.randn(items, args.features)
    length = torch.full((args.batch_size,), args.items)
    target = torch.randint(0, args.max_label + 1, (items,)).float()
    model.train()

    def step() -> float:
        started = time.perf_counter()
        _step(model, optimizer, features, length=length, target=target)
        return time.perf_counter() - started

    for _ in range(2):
        step()
    print(json.dumps({"ready": args.models, "torch": torch.__version__}), flush=True)
    for line in sys.stdin:  # STEPS n, until anything else
        command = line.split()
        if len(command) != 2 or command[0] != "STEPS" or not command[1].isdigit():
            break
        print(json.dumps({"seconds": [step() for _ in range(int(command[1]))]}), flush=True)


def load_sets(args) -> dict:
    """The released ``train`` and ``test`` datasets, the transform fitted on train."""
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
        lists = path.endswith(".npz")  # lists with their labels: nothing is simulated
        frame, user_model = (read_lists(path), None) if lists else (read_letor(path), _USER_MODEL)
        sets[split] = LearningToRankDataset(
            frame, "target", "qid", transform, user_model, seed=args.seed
        )
    sizes = {split: len(dataset) for split, dataset in sets.items()}
    found = {"lists": sizes, "input_dim": sets["train"].input_dim}
    found.update(max_target=sets["train"].max_target, load_seconds=time.perf_counter() - started)
    print(json.dumps(found), flush=True)
    return sets


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = p.add_argument
    add("--official-dir", required=True, help="checkout of the released code")
    add("--train", help="the fold's LETOR training file, or .npz lists")
    add("--test", help="the fold's LETOR test file, or .npz lists (needed to train)")
    add("--epochs", type=int, default=30, help="epochs to train")
    add("--seed", type=int, default=0, help="torch's and the clicks' seed")
    add("--models", default=",".join(MODELS), help="comma-separated")
    add("--threads", type=int, default=2, help="torch's intra-op threads")
    add("--batch-size", type=int, default=2048, help="lists per batch (the released 2048)")
    add(
        "--equivalence",
        metavar="OUT.npz",
        help="train nothing to the end: write each model's first full-batch steps without "
        "dropout to OUT-<model>.npz",
    )
    add("--equivalence-lists", type=int, default=256, help="lists in its batch")
    add("--equivalence-steps", type=int, default=30, help="its steps")
    add("--click-stats", type=int, metavar="N", help="only print N draws' click statistics")
    add("--time-steps", action="store_true", help="time one model's steps on random lists")
    add("--features", type=int, default=46, help="--time-steps: features per item")
    add("--items", type=int, default=16, help="--time-steps: items per list")
    add("--max-label", type=int, default=4, help="--time-steps: the highest click label")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    sys.path.insert(0, args.official_dir)
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {list(MODELS)}")
    if args.time_steps:
        if len(names) != 1:
            parser.error("--time-steps times one model: give --models NAME")
        time_steps(args)
        return 0
    if args.train is None:
        parser.error("--train is needed")
    if args.click_stats:
        click_stats(args.train, draws=args.click_stats, seed=args.seed)
        return 0
    if args.test is None:
        parser.error("--test is needed to train")
    sets = load_sets(args)
    for name in names:
        if args.equivalence:
            out = args.equivalence.removesuffix(".npz") + f"-{name}.npz"
            lists, steps = args.equivalence_lists, args.equivalence_steps
            equivalence(name, sets["train"], out, lists=lists, steps=steps, seed=args.seed)
        else:
            options = dict(epochs=args.epochs, seed=args.seed, batch_size=args.batch_size)
            result = train(name, sets["train"], sets["test"], **options)
            print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
