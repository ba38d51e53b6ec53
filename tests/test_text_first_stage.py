"""The first stage's scores: ``tfr-convert --input trec`` writes each document's run
score as ``first_stage_score`` (golden bytes, the manifest's entries, MS MARCO runs), and
``text_data`` parses it into ``first_stage`` when the manifest names it, in the
documents' order through shuffling, sampling, padding, sorting and trimming; data
without it parses as before."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from tests.test_text_trec_convert import config_for, write_files
from tfr_rankformer.text import text_data
from tfr_rankformer.training.text_config import TextConfig
from tfrecords_tools.text.text_elwc import TextList, TextSplitWriter, read_text_split
from tfrecords_tools.text.trec_convert import TrecConfig, convert_trec
from tfrecords_tools.tfrecord_reader import TFRecordFile

# === Written by the converter ===

# One query, three documents listed out of rank order; d3's 0.1 is no float32 value.
GOLDEN = {
    "queries.tsv": "7\tJaguar speed\n",
    "collection.tsv": "d1\tJaguars run fast\nd2\tA big cat\nd3\tCars\n",
    "qrels.txt": "7 0 d1 2\n7 0 d3 1\n",
    "run.txt": "7 Q0 d3 3 0.1 bm25\n7 Q0 d1 1 12.5 bm25\n7 Q0 d2 2 -3 bm25\n",
}
GOLDEN_ELWC = """
examples { features {
  feature { key: "document_id" value { bytes_list { value: "d1" } } }
  feature { key: "document_tokens" value { bytes_list { value: ["jaguars", "run", "fast"] } } }
  feature { key: "relevance" value { int64_list { value: 2 } } }
  feature { key: "first_stage_score" value { float_list { value: 12.5 } } }
} }
examples { features {
  feature { key: "document_id" value { bytes_list { value: "d2" } } }
  feature { key: "document_tokens" value { bytes_list { value: ["a", "big", "cat"] } } }
  feature { key: "relevance" value { int64_list { value: 0 } } }
  feature { key: "first_stage_score" value { float_list { value: -3.0 } } }
} }
examples { features {
  feature { key: "document_id" value { bytes_list { value: "d3" } } }
  feature { key: "document_tokens" value { bytes_list { value: "cars" } } }
  feature { key: "relevance" value { int64_list { value: 1 } } }
  feature { key: "first_stage_score" value { float_list { value: 0.1 } } }
} }
context { features {
  feature { key: "query_id" value { bytes_list { value: "7" } } }
  feature { key: "query_tokens" value { bytes_list { value: ["jaguar", "speed"] } } }
} }
"""


def test_golden_first_stage_scores_and_their_manifest_entry(tmp_path):
    from google.protobuf import text_format
    from tensorflow_serving.apis import input_pb2

    paths = write_files(tmp_path / "in", **GOLDEN)
    manifest = convert_trec(config_for(paths, tmp_path / "out"), progress=False)
    [(_, record)] = TFRecordFile(str(tmp_path / "out" / "train-00000-of-00001.tfrecord")).records()
    written = input_pb2.ExampleListWithContext.FromString(record)
    expected = text_format.Parse(GOLDEN_ELWC, input_pb2.ExampleListWithContext())
    assert written == expected  # in run order (rank), the scores float32 (0.1 rounded)
    assert manifest.first_stage_feature == "first_stage_score"
    assert manifest.first_stage_score_source == "run score"
    with open(tmp_path / "out" / "manifest.json") as f:
        content = json.load(f)
    assert content["first_stage_feature"] == "first_stage_score"
    assert content["first_stage_score_source"] == "run score"
    assert content["elwc"]["examples"]["first_stage_score"] == {"dtype": "float32", "shape": [1]}
    assert list(content).index("first_stage_feature") == list(content).index("label_feature") + 3


def test_an_ms_marco_run_gives_minus_the_rank(tmp_path):
    run = "7\td3\t3\n7\td1\t1\n7\td2\t2\n"  # qid<TAB>docid<TAB>rank: no score
    paths = write_files(tmp_path / "in", **{**GOLDEN, "run.txt": run})
    manifest = convert_trec(config_for(paths, tmp_path / "out", max_list_size=2), progress=False)
    [written] = read_text_split(str(tmp_path / "out"), "train")
    assert written.document_ids == ("d1", "d2")  # cut to the run's first two
    assert written.first_stage_scores == (-1.0, -2.0)
    assert manifest.first_stage_score_source == "minus rank"
    assert manifest.to_json()["first_stage_score_source"] == "minus rank"


def test_a_document_missing_from_the_collection_takes_its_score_along(tmp_path):
    run = GOLDEN["run.txt"] + "7 Q0 d9 0 99.0 bm25\n"  # ranked first, not in the collection
    paths = write_files(tmp_path / "in", **{**GOLDEN, "run.txt": run})
    manifest = convert_trec(config_for(paths, tmp_path / "out"), progress=False)
    [written] = read_text_split(str(tmp_path / "out"), "train")
    assert written.document_ids == ("d1", "d2", "d3") and written.relevance == (2, 0, 1)
    assert written.first_stage_scores == (12.5, -3.0, pytest.approx(0.1))
    assert manifest.filtered["run_documents_missing_from_collection"] == 1


# === Read by text_data ===

# Lists of 3, 5 and 2 documents; document j of query q is the word ``q<q>d<j>``, its
# label j % 3 and its run score 10 q + j + 0.5 (ranked by the score, highest first).
SIZES = {1: 3, 2: 5, 3: 2}
CORE = {"query", "documents", "mask", "label"}


def _score(q: int, j: int) -> float:
    return 10.0 * q + j + 0.5


def _expected() -> dict:
    """Document text -> (label, first-stage score)."""
    return {f"q{q}d{j}": (j % 3, _score(q, j)) for q, n in SIZES.items() for j in range(n)}


def _trec_files(directory, text=lambda name: name) -> dict:
    """The TREC files of ``SIZES``' lists; ``text`` makes a query's or a document's text
    from its name (``query 1``, ``q1d0``)."""
    directory.mkdir()
    files = {
        "queries": "".join(f"{q}\t{text(f'query {q}')}\n" for q in SIZES),
        "collection": "".join(
            f"q{q}d{j}\t{text(f'q{q}d{j}')}\n" for q, n in SIZES.items() for j in range(n)
        ),
        "qrels": "".join(f"{q} 0 q{q}d{j} {j % 3}\n" for q, n in SIZES.items() for j in range(n)),
        "run": "".join(
            f"{q} Q0 q{q}d{j} {n - j} {_score(q, j)} test\n"
            for q, n in SIZES.items()
            for j in range(n)
        ),
    }
    for name, text in files.items():
        (directory / f"{name}.txt").write_text(text)
    return {name: str(directory / f"{name}.txt") for name in files}


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A converted TREC run: every list holds the feature and the manifest names it."""
    root = tmp_path_factory.mktemp("scored")
    paths = _trec_files(root / "in")
    config = TrecConfig(
        output=str(root / "out"),
        train_queries=paths["queries"],
        collection=paths["collection"],
        qrels=paths["qrels"],
        run=paths["run"],
    )
    convert_trec(config, progress=False)
    return text_data.load_text_data(str(root / "out"), TextConfig())


def _lists(data, **options):
    return text_data.parsed_text_lists(data, "train", **options)


def _rows(batch: dict):
    """Each list's ``(document, label, first-stage score)`` of its real documents, with
    the padding's values."""
    mask = batch["mask"].numpy()
    for row in range(mask.shape[0]):
        real = mask[row]
        documents = [d.decode() for d in batch["documents"].numpy()[row][real]]
        yield (
            list(zip(documents, batch["label"].numpy()[row][real].tolist(),
                     batch["first_stage"].numpy()[row][real].tolist())),
            batch["first_stage"].numpy()[row][~real],
            batch["label"].numpy()[row][~real],
        )  # fmt: skip


def _assert_aligned(batch: dict) -> int:
    """Every real document's label and score are its own; padding holds 0 and -1.
    Returns the number of real documents."""
    expected, count = _expected(), 0
    for triples, padding_scores, padding_labels in _rows(batch):
        for document, label, score in triples:
            assert (label, score) == expected[document], document
        assert np.all(padding_scores == 0.0) and np.all(padding_labels == -1.0)
        count += len(triples)
    return count


def test_the_manifest_names_the_feature(scored):
    assert scored.first_stage_feature == "first_stage_score" and scored.has_first_stage
    assert text_data.FIRST_STAGE == "first_stage"


def test_first_stage_parses_in_list_order_with_zero_on_padding(scored):
    lists = list(text_data.parsed_text_lists(scored, "train", list_size=None))
    assert set(lists[0]) == CORE | {text_data.FIRST_STAGE}
    by_query = {e["query"].numpy().decode(): e for e in lists}
    two = by_query["query 2"]
    assert two["first_stage"].dtype == tf.float32
    # The run's order: highest score (rank 1) first.
    np.testing.assert_array_equal(two["first_stage"], [24.5, 23.5, 22.5, 21.5, 20.5])
    assert [d.decode() for d in two["documents"].numpy()] == [f"q2d{j}" for j in (4, 3, 2, 1, 0)]
    padded = next(iter(text_data.batched_text_lists(_lists(scored, list_size=None), 3)))
    assert padded["first_stage"].shape == (3, 5)
    assert _assert_aligned(padded) == 10
    fixed = next(iter(text_data.batched_text_lists(_lists(scored, list_size=6), 3)))
    assert fixed["first_stage"].shape == (3, 6) and _assert_aligned(fixed) == 10


def test_shuffled_and_sampled_documents_keep_their_scores(scored):
    orders = set()
    for seed in range(6):
        lists = _lists(scored, list_size=3, shuffle_documents=True, seed=seed)
        for batch in text_data.batched_text_lists(lists, 3):
            assert _assert_aligned(batch) == 3 + 3 + 2  # query 2's five sampled to 3
            orders.add(tuple(batch["first_stage"].numpy()[1].tolist()))
    assert len(orders) > 1  # the documents were shuffled and sampled, not cut in order


def test_sorted_and_trimmed_batches_keep_the_scores(scored):
    lists = _lists(scored, list_size=None)
    batches = list(text_data.length_sorted_batches(lists, 2, window=2))
    assert sum(_assert_aligned(b) for b in batches) == 10
    for batch in batches:
        assert batch["first_stage"].shape == batch["mask"].shape
    padded = next(iter(text_data.batched_text_lists(_lists(scored, list_size=8), 3)))
    trimmed = text_data.trimmed_to_documents(padded)
    assert trimmed["first_stage"].shape == (3, 5) and _assert_aligned(trimmed) == 10


def test_data_without_the_feature_parses_as_before(tmp_path, scored):
    writer = TextSplitWriter(str(tmp_path), "train", 1)
    writer.write(TextList("q", ("a",), ("d1", "d2"), (("x",), ("y", "z")), (1, 0)))
    writer.close()
    plain = text_data.load_text_data(str(tmp_path), TextConfig())
    assert plain.first_stage_feature is None and not plain.has_first_stage
    [element] = list(_lists(plain, list_size=3))
    assert set(element) == CORE
    np.testing.assert_array_equal(element["label"], [1.0, 0.0, -1.0])
    for batches in (
        text_data.batched_text_lists(_lists(plain, list_size=None), 2),
        text_data.length_sorted_batches(_lists(plain, list_size=None), 2),
    ):
        [batch] = list(batches)
        assert set(batch) == CORE and batch["documents"].shape == (1, 2)
    # Files that hold the feature, read without a manifest naming it: as before too.
    unnamed = text_data.TextData(
        directory=scored.directory,
        files=scored.files,
        query_feature=scored.query_feature,
        document_feature=scored.document_feature,
        label_feature=scored.label_feature,
        manifest=scored.manifest,
    )
    assert set(next(iter(_lists(unnamed, list_size=None)))) == CORE
