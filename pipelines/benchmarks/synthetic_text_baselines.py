"""BM25 and the oracles on the synthetic text data: what a list-aware re-ranker can gain.

Scores one split of a synthetic text dataset (``tfr-convert --input
synthetic-text``; generated into a temporary directory unless ``--data`` names
one) and prints NDCG@1, 5 and 10 x 100 on its labels for:

* ``random``: the run's order (the generator lists documents at random);
* ``bm25``: ``tfr-bm25 eval``'s BM25 (k1 0.9, b 0.4, index over every split's
  documents);
* ``oracle, document at a time``: the best ranking from each document's own
  text: its query-term coverage (``synthetic_text.oracle_scores(...,
  sees_list=False)``);
* ``oracle, list-aware``: coverage plus whether the document is about its
  list's majority topic (``sees_list=True``): about the best any model can do
  from the text (the utility's noise remains).

The gap between the two oracles is what seeing the list is worth. BM25 comes
close to the document-at-a-time oracle: it counts the query terms a document
holds, and with k1 = 0.9 its term-frequency saturation leaves the repeated
terms of keyword-stuffed documents little weight.

Run: ``python -m pipelines.benchmarks.synthetic_text_baselines --lists 3000``
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from pipelines.flag_table import add_flag
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings
from tfrecords_tools.text.bm25_run import evaluate_bm25
from tfrecords_tools.text.synthetic_text import SyntheticTextConfig, oracle_scores
from tfrecords_tools.text.text_elwc import read_text_split
from tfrecords_tools.text.text_sources import convert_synthetic_text

KS = (1, 5, 10)


def _ndcg(lists, scorer) -> dict:
    size = max(len(t.relevance) for t in lists)
    scores, labels = np.zeros((len(lists), size)), np.zeros((len(lists), size))
    mask = np.zeros((len(lists), size), dtype=bool)
    for row, t in enumerate(lists):
        n = len(t.relevance)
        scores[row, :n] = scorer(t)
        labels[row, :n] = t.relevance
        mask[row, :n] = True
    metrics = evaluate_rankings(scores, labels, labels, mask, ks=KS)
    return {k: metrics[f"ndcg_r@{k}"] for k in KS}


def baselines(directory: str, *, split: str = "test") -> dict:
    """``{ranking: {k: NDCG@k x 100}}`` on one split of a text dataset."""
    lists = list(read_text_split(directory, split))
    bm25 = evaluate_bm25(directory, split=split, ks=KS)
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_flag(parser, "lists", default=3000, help="train lists (vali, test: a third). Default: 3000")
    add_flag(parser, "list_size", default=20, help="mean list size. Default: 20")
    add_flag(parser, "seed", default=0, help="random seed. Default: 0")
    add_flag(parser, "data", help="score this converted dataset instead of generating one")
    add_flag(parser, "split", help="the split scored. Default: test")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.data
        if directory is None:
            directory = os.path.join(scratch, "data")
            third = max(1, args.lists // 3)
            config = SyntheticTextConfig(
                train_queries=args.lists,
                vali_queries=third,
                test_queries=third,
                mean_list_size=args.list_size,
                seed=args.seed,
            )
            convert_synthetic_text(config, output=directory, progress=False)
        result = baselines(directory, split=args.split)
    print(f"{result.pop('num_lists')} {args.split} lists; NDCG x 100")
    print("| ranking | " + " | ".join(f"NDCG@{k}" for k in KS) + " |")
    print("|---|" + "---|" * len(KS))
    for name, values in result.items():
        print(f"| {name} | " + " | ".join(f"{values[k]:.2f}" for k in KS) + " |")


if __name__ == "__main__":
    main()
