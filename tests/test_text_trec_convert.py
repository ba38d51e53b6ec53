"""TREC-layout text data to text ELWC: the happy path, counted filtering and every refusal."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from pipelines.convert_cli import main as convert_main
from tfrecords_tools.text.text_elwc import read_text_split
from tfrecords_tools.text.trec_convert import TrecConfig, convert_trec, hash_split
from tfrecords_tools.text.trec_files import TrecFormatError

QUERIES = "1\tWhat is COVID-19?\n2\tjaguar speed\n3\tno judgements here\n4\tnot in the run\n"
# d4 has a title column; d9 is not needed by any list; d7 is missing.
COLLECTION = (
    "d1\tCOVID-19 is a disease.\n"
    "d2\tA jaguar is a big cat.\n"
    "d3\tThe Jaguar car is fast.\n"
    "d4\tSpeed of cats\tJaguars run at 80 km/h.\n"
    "d5\tUnrelated text.\n"
    "d9\tnever listed\n"
)
QRELS = "1 0 d1 2\n1 0 d5 0\n2 0 d4 3\n2 0 d3 1\n2 0 d2 -1\n4 0 d1 1\n9 0 d1 1\n"
# Query 1 in MS MARCO format, query 2 as a TREC run; query 2 lists d7 (missing).
RUN = (
    "1\td5\t2\n"
    "1\td1\t1\n"
    "2 Q0 d2 3 1.5 bm25\n"
    "2 Q0 d7 2 2.0 bm25\n"
    "2 Q0 d3 4 1.0 bm25\n"
    "2 Q0 d4 1 9.0 bm25\n"
    "3 Q0 d1 1 1.0 bm25\n"
)


def write_files(directory, **overrides) -> dict:
    os.makedirs(directory, exist_ok=True)
    contents = {"queries.tsv": QUERIES, "collection.tsv": COLLECTION, "qrels.txt": QRELS}
    contents["run.txt"] = RUN
    contents.update(overrides)
    paths = {}
    for name, text in contents.items():
        path = os.path.join(directory, name)
        if name.endswith(".gz"):
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        paths[name] = path
    return paths


def config_for(paths, output, **options) -> TrecConfig:
    files = {
        "train_queries": paths["queries.tsv"],
        "collection": paths["collection.tsv"],
        "qrels": paths["qrels.txt"],
        "run": paths["run.txt"],
    }
    return TrecConfig(output=str(output), **{**files, **options})


def test_happy_path_lists_labels_and_counts(tmp_path):
    paths = write_files(tmp_path / "in")
    manifest = convert_trec(config_for(paths, tmp_path / "out", max_list_size=3), progress=False)
    lists = {t.query_id: t for t in read_text_split(str(tmp_path / "out"), "train")}
    assert sorted(lists) == ["1", "2"]
    one, two = lists["1"], lists["2"]
    assert one.query_tokens == ("what", "is", "covid", "19")
    assert one.document_ids == ("d1", "d5") and one.relevance == (2, 0)
    assert one.first_stage_scores == (-1.0, -2.0)  # MS MARCO lines: minus the rank
    assert one.document_tokens[0] == ("covid", "19", "is", "a", "disease")
    # Run order is by rank; the list is cut to 3 (d4, d7, d2) and d7 is missing.
    assert two.document_ids == ("d4", "d2") and two.relevance == (3, 0)
    assert two.first_stage_scores == (9.0, 1.5)  # the run's scores
    assert two.document_tokens[0][:3] == ("speed", "of", "cats")  # title joined to the text
    assert manifest.is_text
    assert manifest.label_feature == "relevance"
    assert manifest.query_feature == "query_tokens"
    assert manifest.document_feature == "document_tokens"
    assert manifest.first_stage_feature == "first_stage_score"
    # Query 1's lines have no score, query 2's have: the two kinds are mixed.
    assert manifest.first_stage_score_source == "run score and minus rank"
    train = manifest.splits["train"]
    assert (train.num_lists, train.num_items) == (2, 4)
    assert train.list_length_histogram == {"2": 2}
    assert train.empty_list_length_histogram == {}
    assert manifest.extra["input"] == {
        "queries": 4,
        "run_lines": 7,
        "qrels_lines": 6,
        "documents_read": 4,  # d1 d2 d4 d5: d3 was cut, d9 is not needed
    }
    filtered = manifest.filtered
    assert filtered["queries_without_qrels"] == 1  # query 3
    assert filtered["queries_without_run"] == 1  # query 4
    assert filtered["qrels_lines_of_unknown_queries"] == 1  # qid 9
    assert filtered["negative_labels_read_as_0"] == 1
    assert filtered["lists_cut_to_max_list_size"] == 1
    assert filtered["run_documents_beyond_max_list_size"] == 1
    assert filtered["run_documents_missing_from_collection"] == 1
    assert filtered["relevant_documents_not_in_lists"] == 1  # d3 (label 1) was cut
    assert filtered["unjudged_items"] == 0
    with open(tmp_path / "out" / "manifest.json") as f:
        assert json.load(f) == manifest.to_json()


def test_hash_split_and_per_split_files(tmp_path):
    paths = write_files(tmp_path / "in")
    assert hash_split("1", seed=0, fractions=(1, 0, 0)) == "train"
    assert hash_split("1", seed=0, fractions=(0, 0, 1)) == "test"
    splits = {hash_split(str(q), seed=3, fractions=(0.5, 0.25, 0.25)) for q in range(200)}
    assert splits == {"train", "vali", "test"}
    config = TrecConfig(
        output=str(tmp_path / "hashed"),
        queries=paths["queries.tsv"],
        collection=paths["collection.tsv"],
        qrels=paths["qrels.txt"],
        run=paths["run.txt"],
        split_fractions=(0.5, 0.0, 0.5),
        seed=11,
    )
    manifest = convert_trec(config, progress=False)
    for qid in ("1", "2"):
        split = hash_split(qid, seed=11, fractions=(0.5, 0.0, 0.5))
        assert qid in {t.query_id for t in read_text_split(str(tmp_path / "hashed"), split)}
    assert manifest.splits["vali"].num_lists == 0
    run_of_1_and_2 = RUN.replace("3 Q0 d1 1 1.0 bm25\n", "")
    split_files = write_files(
        tmp_path / "in2",
        **{"queries.tsv": "1\tcovid\n", "test.tsv": "2\tjaguar speed\n", "run.txt": run_of_1_and_2},
    )
    config = config_for(split_files, tmp_path / "split", test_queries=split_files["test.tsv"])
    manifest = convert_trec(config, progress=False)
    assert [manifest.splits[s].num_lists for s in ("train", "vali", "test")] == [1, 0, 1]


def test_qid_lists_split_the_queries(tmp_path, capsys):
    paths = write_files(tmp_path / "in", **{"train.qids": "2\n", "test.qids": "1 extra\n7\n"})
    out = str(tmp_path / "out")
    args = ["--input", "trec", "--queries", paths["queries.tsv"], "--collection"]
    args += [paths["collection.tsv"], "--qrels", paths["qrels.txt"], "--run", paths["run.txt"]]
    args += ["--train-qids", paths["train.qids"], "--test-qids", paths["test.qids"]]
    assert convert_main([*args, "--output", out]) == 0, capsys.readouterr().err
    assert [t.query_id for t in read_text_split(out, "train")] == ["2"]
    assert [t.query_id for t in read_text_split(out, "test")] == ["1"]
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    filtered = manifest["filtered"]
    assert manifest["input"]["queries"] == 4
    assert filtered["queries_in_no_split_list"] == 2  # 3 and 4
    assert filtered["run_lines_of_queries_in_no_split_list"] == 1  # query 3's line
    assert filtered["qrels_lines_of_queries_in_no_split_list"] == 1  # query 4's line
    assert filtered["split_list_qids_without_query"] == 1  # 7
    twice = write_files(tmp_path / "in", **{"test.qids": "1\n2\n"})["test.qids"]
    with pytest.raises(TrecFormatError, match=r"test.qids: line 2: qid '2' listed twice"):
        convert_trec(
            TrecConfig(
                output=str(tmp_path / "o2"),
                queries=paths["queries.tsv"],
                collection=paths["collection.tsv"],
                qrels=paths["qrels.txt"],
                run=paths["run.txt"],
                train_qids=paths["train.qids"],
                test_qids=twice,
            ),
            progress=False,
        )
    with pytest.raises(ValueError, match="split already"):
        config_for(paths, tmp_path / "o3", test_qids=twice)


def test_gzip_inputs_and_the_cli_with_a_directory(tmp_path, capsys):
    write_files(
        tmp_path / "in",
        **{"collection.tsv.gz": COLLECTION, "collection.tsv": "d1\tstale copy\n"},
    )
    os.remove(tmp_path / "in" / "collection.tsv")
    out = tmp_path / "out"
    code = convert_main(["--input", f"trec:{tmp_path / 'in'}", "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "train 2 lists / 5 items" in printed
    assert "queries without qrels 1" in printed
    lists = {t.query_id: t for t in read_text_split(str(out), "train")}
    assert lists["1"].document_tokens[0] == ("covid", "19", "is", "a", "disease")


def test_cli_refuses_options_of_the_other_kind_of_input(tmp_path, capsys):
    with pytest.raises(SystemExit):
        convert_main(["--input", "trec", "--output", str(tmp_path / "o"), "--simulate-clicks"])
    assert "--simulate-clicks does not apply to --input trec" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        convert_main(["--input", "synthetic", "--output", str(tmp_path / "o"), "--run", "r"])
    assert "--run does not apply to LETOR" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        convert_main(
            ["--input", "synthetic-text", "--output", str(tmp_path / "o")]
            + ["--synthetic-length-spread", "web30k"]
        )
    assert "--synthetic-length-spread does not apply to --input synthetic-text" in (
        capsys.readouterr().err
    )
    code = convert_main(["--input", "trec", "--output", str(tmp_path / "o"), "--run", "r"])
    assert code == 1
    assert "no query file given" in capsys.readouterr().err


REFUSALS = [
    ("queries.tsv", QUERIES + "5 has no tab\n", 5, "found no tab"),
    ("queries.tsv", QUERIES + "2\tagain\n", 5, "qid '2' given twice (first at"),
    ("collection.tsv", COLLECTION + "d2\tagain\n", 7, "document 'd2' given twice"),
    ("collection.tsv", COLLECTION + "\tno id\n", 7, "empty docid"),
    ("qrels.txt", QRELS + "1 0 d1\n", 8, "expected 4 columns"),
    ("qrels.txt", QRELS + "1 0 d9 high\n", 8, "relevance 'high' is not an integer"),
    ("qrels.txt", QRELS + "1 0 d1 2\n", 8, "judged twice (first at line 1)"),
    ("run.txt", RUN + "8 Q0 d1 1 1.0 bm25\n", 8, "qid '8' is not in the query files"),
    ("run.txt", RUN + "1 Q0 d1 9 1.0 bm25\n", 8, "listed twice for qid '1' (first at line 2)"),
    ("run.txt", RUN + "1 d1\n", 8, "found 2 columns"),
    ("run.txt", RUN + "1 Q0 d2 x 1.0 bm25\n", 8, "rank 'x' is not an integer"),
    ("run.txt", RUN + "1 Q0 d2 3 high bm25\n", 8, "score 'high' is not a number"),
    ("run.txt", RUN + "1 Q0 d2 3 1e40 bm25\n", 8, "score 1e+40 is beyond float32's range"),
    ("run.txt", RUN + "1 Q0 d2 3 -inf bm25\n", 8, "score -inf is not a finite number"),
]


@pytest.mark.parametrize("name, content, line, message", REFUSALS)
def test_refusals_name_file_and_line_and_leave_nothing(tmp_path, name, content, line, message):
    paths = write_files(tmp_path / "in", **{name: content})
    output = tmp_path / "out"
    with pytest.raises(TrecFormatError) as error:
        convert_trec(config_for(paths, output), progress=False)
    assert error.value.path == paths[name] and error.value.line == line
    assert message in str(error.value)
    assert str(error.value).startswith(f"{paths[name]}: line {line}: ")
    assert sorted(os.listdir(tmp_path)) == ["in"]  # no output, no temporary directory


def test_a_document_in_two_run_files_is_refused(tmp_path):
    paths = write_files(tmp_path / "in", **{"run2.txt": "2 Q0 d9 1 1.0 x\n1 Q0 d5 7 0.1 x\n"})
    config = config_for(paths, tmp_path / "out", run=(paths["run.txt"], paths["run2.txt"]))
    with pytest.raises(TrecFormatError) as error:
        convert_trec(config, progress=False)
    assert str(error.value) == (
        f"{paths['run2.txt']}: line 2: document 'd5' listed twice for qid '1' "
        f"(first at {paths['run.txt']}: line 1)"
    )


def test_config_file_with_flag_overrides(tmp_path, capsys):
    paths = write_files(tmp_path / "in")
    settings = {
        "train_queries": [paths["queries.tsv"]],
        "collection": [paths["collection.tsv"]],
        "qrels": [paths["qrels.txt"]],
        "run": [paths["run.txt"]],
        "max_list_size": 1,
    }
    config = tmp_path / "text.json"
    config.write_text(json.dumps(settings))
    out = str(tmp_path / "out")
    args = ["--input", "trec", "--config", str(config), "--output", out, "--max-list-size", "2"]
    assert convert_main(args) == 0, capsys.readouterr().err
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    assert manifest["parameters"]["max_list_size"] == 2
    assert manifest["splits"]["train"]["num_items"] == 3  # d1 d5, then d4 (d7 is missing)


def test_bad_utf8_is_refused_with_its_line(tmp_path):
    paths = write_files(tmp_path / "in")
    with open(paths["collection.tsv"], "ab") as f:
        f.write(b"d5x\tcaf\xe9\n")
    # d5x is not needed: its bytes are not decoded. Make it needed.
    with open(paths["run.txt"], "a") as f:
        f.write("1 Q0 d5x 3 0.5 bm25\n")
    with pytest.raises(TrecFormatError, match=r"collection.tsv: line 7: not UTF-8"):
        convert_trec(config_for(paths, tmp_path / "out"), progress=False)


@pytest.mark.parametrize(
    "name, line, reason",
    [
        ("run.txt", b"1 Q0 caf\xe9 3 0.5 bm25\n", "invalid continuation byte"),
        ("qrels.txt", b"1 0 caf\xe9 1\n", "invalid continuation byte"),
        # A document no list needs: its id is checked all the same.
        ("collection.tsv", b"caf\xe9\tcoffee\n", "unexpected end of data"),
    ],
)
def test_a_docid_that_is_not_utf8_is_refused_naming_file_line_and_bytes(
    tmp_path, capsys, name, line, reason
):
    """cp1252 ids: read leniently, ``caf\\xe9`` and ``caf\\xe8`` would be one id."""
    paths = write_files(tmp_path / "in")
    with open(paths[name], "ab") as f:
        f.write(line)
    number = len(open(paths[name], "rb").read().splitlines())
    argv = ["--input", "trec", "--queries", paths["queries.tsv"], "--collection"]
    argv += [paths["collection.tsv"], "--qrels", paths["qrels.txt"], "--run", paths["run.txt"]]
    assert convert_main(argv + ["--output", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == (
        f"tfr-convert: error: {paths[name]}: line {number}: not UTF-8 text: b'caf\\xe9' "
        f"({reason}); re-encode the file as UTF-8\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["in"]


def test_nothing_left_is_an_error_listing_the_counts(tmp_path, capsys):
    paths = write_files(tmp_path / "in", **{"qrels.txt": "9 0 d1 1\n"})
    code = convert_main(
        ["--input", "trec", "--train-queries", paths["queries.tsv"], "--collection",
         paths["collection.tsv"], "--qrels", paths["qrels.txt"], "--run", paths["run.txt"],
         "--output", str(tmp_path / "out")]
    )  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err
    assert "no list left to write" in err and "queries without qrels 3" in err
    assert sorted(os.listdir(tmp_path)) == ["in"]


def test_an_existing_output_is_kept(tmp_path):
    paths = write_files(tmp_path / "in")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    for overwrite in (False, True):
        config = config_for(paths, tmp_path / "out", overwrite=overwrite)
        with pytest.raises(FileExistsError, match="not written by tfr-convert: it holds keep.txt"):
            convert_trec(config, progress=False)
        assert os.listdir(tmp_path / "out") == ["keep.txt"]
    os.remove(tmp_path / "out" / "keep.txt")
    convert_trec(config_for(paths, tmp_path / "out"), progress=False)
    with pytest.raises(FileExistsError, match="pass --overwrite"):
        convert_trec(config_for(paths, tmp_path / "out"), progress=False)
    convert_trec(config_for(paths, tmp_path / "out", overwrite=True), progress=False)
    assert "manifest.json" in os.listdir(tmp_path / "out")


def test_token_limits_are_counted(tmp_path):
    paths = write_files(tmp_path / "in")
    config = config_for(paths, tmp_path / "out", max_query_tokens=2, max_document_tokens=3)
    manifest = convert_trec(config, progress=False)
    lists = {t.query_id: t for t in read_text_split(str(tmp_path / "out"), "train")}
    assert lists["1"].query_tokens == ("what", "is")
    assert all(len(d) <= 3 for t in lists.values() for d in t.document_tokens)
    assert manifest.filtered["queries_truncated"] == 3  # all but "jaguar speed"
    assert manifest.filtered["documents_truncated"] == 4


def test_config_validation():
    with pytest.raises(ValueError, match="not both"):
        TrecConfig(output="o", queries="q", train_queries="t", collection="c", qrels="r", run="x")
    with pytest.raises(ValueError, match="no run file"):
        TrecConfig(output="o", queries="q", collection="c", qrels="r")
    with pytest.raises(ValueError, match="summing to 1"):
        TrecConfig(
            output="o", queries="q", collection="c", qrels="r", run="x", split_fractions=(1, 1, 0)
        )
