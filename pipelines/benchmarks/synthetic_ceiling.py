"""What a list-aware ranker can gain on synthetic data, from rankings that know its truth.

Feature lists: NDCG@10 of the noiseless utility, the best pointwise ranking and quality alone.
``--text``: the run's order, BM25 and the document-at-a-time and list-aware text oracles.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from pipelines.benchmarks.bench_support import parser as bench_parser
from pipelines.benchmarks.rerank_scorers import list_metrics
from tfr_rankformer.ranking.ranking_metrics import ndcg_at_k
from tfrecords_tools.synthetic import draw_latent_list, list_sizes

KS = (1, 5, 10)


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
            # Within a list, the relative price orders items as the absolute one does.
            "pointwise": latent.quality - 1.2 * latent.log_price,
            "quality": latent.quality,
        }
        for name, scores in rankings.items():
            totals[name].append(ndcg_at_k(scores, labels, 10))
    return {name: 100 * float(np.mean(values)) for name, values in totals.items()} | {
        "lists_counted": len(totals["utility"])
    }


def _ndcg(lists, scorer) -> dict:
    metrics = list_metrics(lists, [scorer(t) for t in lists], KS)
    return {k: metrics[f"ndcg_r@{k}"] for k in KS}


def text_baselines(directory: str, *, split: str = "test") -> dict:
    """``{ranking: {k: NDCG@k x 100}}`` on one split of a text dataset."""
    from tfrecords_tools.text.bm25_run import evaluate_bm25_splits
    from tfrecords_tools.text.synthetic_text import oracle_scores
    from tfrecords_tools.text.text_elwc import read_text_split

    lists = list(read_text_split(directory, split))
    bm25 = evaluate_bm25_splits(directory, (split,), ks=KS)[split]
    return {
        "random": _ndcg(lists, lambda t: -np.arange(len(t.relevance), dtype=np.float64)),
        "bm25": {k: bm25[f"ndcg@{k}"] for k in KS},
        "oracle, document at a time": _ndcg(
            lists, lambda t: oracle_scores(t.query_tokens, t.document_tokens, sees_list=False)
        ),
        "oracle, list-aware": _ndcg(
            lists, lambda t: oracle_scores(t.query_tokens, t.document_tokens, sees_list=True)
        ),
        "num_lists": len(lists),
    }


def print_text_baselines(args) -> None:
    from tfrecords_tools.text.synthetic_text import SyntheticTextConfig
    from tfrecords_tools.text.text_sources import convert_synthetic_text

    with tempfile.TemporaryDirectory() as scratch:
        directory = args.data
        if directory is None:
            directory = os.path.join(scratch, "data")
            third = max(1, args.lists // 3)
            sizes = dict(train_queries=args.lists, vali_queries=third, test_queries=third)
            config = SyntheticTextConfig(**sizes, mean_list_size=args.list_size, seed=args.seed)
            convert_synthetic_text(config, output=directory, progress=False)
        result = text_baselines(directory, split=args.split)
    print(f"{result.pop('num_lists')} {args.split} lists; NDCG x 100")
    print("| ranking | " + " | ".join(f"NDCG@{k}" for k in KS) + " |")
    print("|---|" + "---|" * len(KS))
    for name, values in result.items():
        print(f"| {name} | " + " | ".join(f"{values[k]:.2f}" for k in KS) + " |")


def main(argv=None) -> None:
    parser = bench_parser(__doc__)
    add = parser.add_argument
    add("--text", action="store_true", help="synthetic text: BM25 and the oracles")
    add("--lists", type=int, help="lists drawn (default: 20000; text: 3000 train, a third each)")
    add("--list-size", type=int, help="mean list size (default: 40; text: 20)")
    add("--seed", type=int, default=0, help="random seed")
    add("--data", help="--text: score this converted dataset instead of generating one")
    add("--split", default="test", help="--text: the split scored")
    args = parser.parse_args(argv)
    args.lists = args.lists or (3000 if args.text else 20_000)
    args.list_size = args.list_size or (20 if args.text else 40)
    if args.text:
        print_text_baselines(args)
        return
    result = ceilings(args.lists, mean_list_size=args.list_size, seed=args.seed)
    print(f"{result['lists_counted']} lists with a relevant item; NDCG@10 x 100, explicit labels")
    for name in ("utility", "pointwise", "quality"):
        print(f"  {name:<10} {result[name]:6.2f}")


if __name__ == "__main__":
    main()
