"""The synthetic text lists: deterministic, and relevance that depends on the list."""

from __future__ import annotations

import collections
import filecmp
import json
import os

import numpy as np
import pytest

from pipelines.convert_cli import main as convert_main
from tfr_rankformer.ranking.ranking_metrics import evaluate_rankings
from tfrecords_tools.text.synthetic_text import (
    VOCABULARY,
    SyntheticTextConfig,
    generate_text_lists,
    generate_trec_layout,
    majority_topic_match,
    oracle_scores,
    query_coverage,
)
from tfrecords_tools.text.text_elwc import read_text_split


def doc_at_a_time(query_tokens, document_tokens) -> np.ndarray:
    return oracle_scores(query_tokens, document_tokens, sees_list=False)


def list_aware(query_tokens, document_tokens) -> np.ndarray:
    return oracle_scores(query_tokens, document_tokens, sees_list=True)


def ndcg(lists, scorer, ks=(1, 10)) -> dict:
    """NDCG x 100 of ``scorer(query_tokens, document_tokens)`` over ``(q, docs, labels)``."""
    size = max(len(labels) for _, _, labels in lists)
    scores, labels, mask = (np.zeros((len(lists), size)) for _ in range(3))
    for row, (query, documents, y) in enumerate(lists):
        n = len(y)
        scores[row, :n] = scorer(query, documents)
        labels[row, :n] = y
        mask[row, :n] = 1
    metrics = evaluate_rankings(scores, labels, labels, mask.astype(bool), ks=ks)
    return {k: metrics[f"ndcg_r@{k}"] for k in ks}


def test_generation_is_deterministic_per_seed(tmp_path):
    config = SyntheticTextConfig(train_queries=12, vali_queries=3, test_queries=3, seed=5)
    first = generate_trec_layout(str(tmp_path / "a"), config)
    second = generate_trec_layout(str(tmp_path / "b"), config)
    for name in first:
        assert filecmp.cmp(first[name], second[name], shallow=False), name
    other = generate_trec_layout(str(tmp_path / "c"), SyntheticTextConfig(seed=6, **_small()))
    assert not filecmp.cmp(first["collection"], other["collection"], shallow=False)


def _small() -> dict:
    return {"train_queries": 12, "vali_queries": 3, "test_queries": 3}


def test_tfr_convert_synthetic_text_is_byte_identical_for_a_seed(tmp_path, capsys):
    outputs = []
    for name in ("one", "two"):
        out = str(tmp_path / name)
        args = ["--input", "synthetic-text", "--synthetic-lists", "12", "--seed", "3"]
        assert convert_main([*args, "--output", out, "--no-progress"]) == 0
        outputs.append(out)
    assert "train 12 lists" in capsys.readouterr().out
    names = sorted(n for n in os.listdir(outputs[0]) if n.endswith(".tfrecord"))
    assert names == [f"{s}-00000-of-00001.tfrecord" for s in ("test", "train", "vali")]
    for name in names:
        assert filecmp.cmp(*(os.path.join(o, name) for o in outputs), shallow=False)
    lists = list(read_text_split(outputs[0], "vali"))
    assert len(lists) == 4  # a third of the train lists
    assert all(len(t.query_tokens) in (2, 3, 4) for t in lists)
    # The generated run is a random order, no first stage: its scores are not written.
    assert all(t.first_stage_scores is None for t in lists)
    with open(os.path.join(outputs[0], "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    assert "first_stage_feature" not in manifest and "first_stage_score_source" not in manifest
    assert "first_stage_score" not in manifest["elwc"]["examples"]
    splits = manifest["splits"]
    for split, entry in splits.items():
        written = list(read_text_split(outputs[0], split))
        lengths = collections.Counter(len(t.document_ids) for t in written)
        empty = collections.Counter(len(t.document_ids) for t in written if max(t.relevance) == 0)
        assert entry["list_length_histogram"] == {str(n): c for n, c in lengths.items()}
        assert entry["empty_list_length_histogram"] == {str(n): c for n, c in empty.items()}
        assert (
            sum(int(n) * c for n, c in entry["list_length_histogram"].items()) == entry["num_items"]
        )


def test_labels_span_every_grade_and_follow_the_drawn_utility():
    lists = generate_text_lists(300, mean_list_size=20, rng=np.random.default_rng(0))
    labels = np.concatenate([t.labels for t in lists])
    shares = np.bincount(labels, minlength=5) / len(labels)
    assert shares.min() > 0.05 and shares[0] > shares[4]
    # The text shows what the labels depend on: coverage and the topic.
    for t in lists[:20]:
        np.testing.assert_allclose(query_coverage(t.query_tokens, t.document_tokens), t.coverage)
        assert [VOCABULARY.topic_of(d) for d in t.document_tokens] == t.topics.tolist()
        majority = np.bincount(t.topics).argmax()
        if np.sum(t.topics == majority) > len(t.topics) / 2:
            np.testing.assert_array_equal(
                majority_topic_match(t.document_tokens), t.topics == majority
            )


def test_an_oracle_that_sees_the_list_beats_the_best_document_at_a_time_scorer():
    lists = generate_text_lists(400, mean_list_size=20, rng=np.random.default_rng(1))
    triples = [(t.query_tokens, t.document_tokens, t.labels) for t in lists]
    alone = ndcg(triples, doc_at_a_time)
    aware = ndcg(triples, list_aware)
    # Measured on these lists: NDCG@10 about 88 alone against 93 with the list.
    assert aware[10] > alone[10] + 3
    assert aware[1] > alone[1] + 5
    # A document's own topic is no pointwise signal: adding it either way does not help.
    first_topic = [
        lambda q, d, sign=sign: (
            doc_at_a_time(q, d) + sign * np.array([VOCABULARY.topic_of(x) % 2 for x in d])
        )
        for sign in (-0.6, 0.6)
    ]
    for scorer in first_topic:
        assert ndcg(triples, scorer)[10] < alone[10] + 0.5


def test_config_validation():
    with pytest.raises(ValueError, match="`mean_list_size` must be a positive int"):
        SyntheticTextConfig(mean_list_size=0)
    with pytest.raises(ValueError, match="`seed`"):
        SyntheticTextConfig(seed=-1)


def test_cli_refuses_unknown_settings_and_file_flags(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"synthetic": {"lists": 3}}')
    out = str(tmp_path / "out")
    assert convert_main(["--input", "synthetic-text", "--config", str(bad), "--output", out]) == 1
    assert "Unknown synthetic settings ['lists']" in capsys.readouterr().err
    args = ["--input", "synthetic-text", "--run", "r.txt", "--output", out]
    assert convert_main(args) == 1
    assert "generates its files" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_cli_names_an_output_given_only_in_the_config_file(tmp_path, capsys):
    out = str(tmp_path / "out")
    config = tmp_path / "text.json"
    config.write_text(json.dumps({"output": out, "synthetic": {"train_queries": 6}}))
    args = ["--input", "synthetic-text", "--config", str(config), "--no-progress"]
    assert convert_main(args) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out} (manifest.json describes it)" in printed
    assert "train 6 lists" in printed and "vali 2 lists" in printed  # a third of the train lists
    assert os.path.isfile(os.path.join(out, "manifest.json"))
