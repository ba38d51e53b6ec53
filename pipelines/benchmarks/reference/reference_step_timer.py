"""Times training steps of the RankFormer authors' released PyTorch models, on request.

Run by ``train_bench`` under a Python with torch on one batch of random lists: it prints
``{"ready": ...}``, then answers each input line ``STEPS n`` with ``{"seconds": [...]}``
(one per step, as the released ``main.py`` steps) until ``QUIT``; waiting, it uses no CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

MODELS = ("rankformer", "transformer", "mlp")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add = parser.add_argument
    add("--official-dir", required=True, help="checkout of the released code")
    add("--model", required=True, choices=MODELS, help="the released model")
    add("--features", type=int, required=True, help="features per item")
    add("--batch-size", type=int, default=2048, help="lists")
    add("--items", type=int, default=16, help="items per list")
    add("--max-label", type=int, default=4, help="the highest click label")
    add("--threads", type=int, default=2, help="torch's threads")
    add("--seed", type=int, default=0, help="torch's seed")
    args = parser.parse_args(argv)
    sys.path.insert(0, args.official_dir)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch
    from reference_runner import build

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = build(args.model, args.features, args.max_label)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    items = args.batch_size * args.items
    features = torch.randn(items, args.features)
    length = torch.full((args.batch_size,), args.items)
    target = torch.randint(0, args.max_label + 1, (items,)).float()
    model.train()

    def step() -> float:
        started = time.perf_counter()
        optimizer.zero_grad()
        scores = model(features, length)
        model.compute_loss(scores, target, length).backward()
        optimizer.step()
        return time.perf_counter() - started

    for _ in range(2):
        step()
    print(json.dumps({"ready": args.model, "torch": torch.__version__}), flush=True)
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "QUIT":
            break
        if command[0] != "STEPS" or len(command) != 2 or not command[1].isdigit():
            print(json.dumps({"error": f"unknown command {line.strip()!r}"}), flush=True)
            continue
        print(json.dumps({"seconds": [step() for _ in range(int(command[1]))]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
