"""How much the synthetic data's list context is worth, from its hidden variables.

Draws lists as ``tfrecords_tools.synthetic`` does and ranks each by scores
computed from the hidden variables (true quality, not its noisy feature
views), then prints the mean NDCG@10 on the explicit labels for:

* ``utility``: the utility without its noise term, the list's intent
  included: the best any model can do on this data (up to the noise);
* ``pointwise``: the best ranking from each item's own variables alone.
  An item's category matches the list's intent with the same odds whichever
  category it is, so the intent term drops out; quality and absolute price
  remain (within a list, the relative price orders items as the absolute
  one does);
* ``quality``: quality alone.

The gap between the first two is what a listwise model can gain over a
pointwise one. Lists with no relevant item are left out, as in evaluation.

Run: ``python -m pipelines.benchmarks.synthetic_ceiling --lists 20000``
"""

from __future__ import annotations

import argparse

import numpy as np

from pipelines.flag_table import add_flag
from tfr_rankformer.ranking.ranking_metrics import ndcg_at_k
from tfrecords_tools.synthetic import draw_latent_list, list_sizes


def ceilings(num_lists: int, *, mean_list_size: int = 40, seed: int = 0) -> dict:
    """Mean NDCG@10 x 100 of the three rankings over ``num_lists`` drawn lists."""
    rng = np.random.default_rng(seed)
    totals = {"utility": [], "pointwise": [], "quality": []}
    for n in list_sizes(rng, num_lists, mean_list_size).tolist():
        latent = draw_latent_list(rng, n)
        labels = latent.labels
        if not labels.any():
            continue
        rankings = {
            "utility": latent.utility - latent.noise,
            "pointwise": latent.quality - 1.2 * latent.log_price,
            "quality": latent.quality,
        }
        for name, scores in rankings.items():
            totals[name].append(ndcg_at_k(scores, labels, 10))
    return {name: 100 * float(np.mean(values)) for name, values in totals.items()} | {
        "lists_counted": len(totals["utility"])
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flag(parser, "lists", default=20_000, help="lists drawn. Default: 20000")
    add_flag(parser, "list_size", default=40, help="mean list size. Default: 40")
    add_flag(parser, "seed", default=0, help="random seed. Default: 0")
    args = parser.parse_args(argv)
    result = ceilings(args.lists, mean_list_size=args.list_size, seed=args.seed)
    print(f"{result['lists_counted']} lists with a relevant item; NDCG@10 x 100, explicit labels")
    for name in ("utility", "pointwise", "quality"):
        print(f"  {name:<10} {result[name]:6.2f}")


if __name__ == "__main__":
    main()
