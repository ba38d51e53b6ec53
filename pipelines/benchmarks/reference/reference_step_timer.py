"""Times training steps of the RankFormer authors' released PyTorch models, on request.

Run by ``train_bench`` with a Python that has torch, never imported by this
project: it builds one released model (``rankformer`` with list-prediction
strength 1, ``transformer`` with strength 0, or ``mlp``; the settings of
``reference_runner.build``), AdamW (rate 1e-3, weight decay 0.1) and one
in-memory batch of random lists (normal features, labels drawn uniformly from
0 .. ``--max-label``, every list ``--items`` long, as the released code's
batches are a flat ``[items, features]`` tensor with the lists' lengths), runs
two warm-up steps, prints ``{"ready": ...}`` and then answers each line
``STEPS n`` on its standard input with ``{"seconds": [...]}``, the duration of
each of ``n`` training steps (``zero_grad``, forward, ``compute_loss``,
``backward``, ``step``, as the released ``main.py`` runs them). ``QUIT`` or
the end of its input ends it. Waiting for a line, it uses no CPU, so the
benchmark can time it in alternation with our steps.

Usage::

    python reference_step_timer.py --official-dir DIR --model rankformer \\
        --features 46 [--batch-size 2048] [--items 16] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

MODELS = ("rankformer", "transformer", "mlp")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--official-dir", required=True, help="checkout of the released code")
    parser.add_argument("--model", required=True, choices=MODELS)
    parser.add_argument("--features", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--max-label", type=int, default=4, help="the released click labels' 4")
    parser.add_argument("--threads", type=int, default=2, help="torch's intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
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
