"""The README's path from MSLR-WEB30K on disk to a served answer, run as written.

The blocks marked ``<!-- user-path:NAME -->`` are run verbatim on a small
WEB30K-shaped set (136 features, grades 0-4, ``MSLR-WEB30K/Fold1/``) in a
working directory of its own, with the installed commands on PATH as
``source .venv/bin/activate`` puts them:

- ``install``: ``make -n install`` names the target the block types;
- ``train``: convert, train with default flags but two epochs, evaluate, export;
- ``serve`` and ``serve-compose``: through bash with ``docker`` replaced by a function that
  records its arguments: ``docker run`` mounts the export the train block wrote, and
  compose's own parser accepts the compose command there;
- ``python`` and ``request``: against a stand-in for TF Serving on port 8501
  that decodes requests as TF Serving does and answers from the export's latest version
  (``tf_serving_fakes``): the scores equal ``tfr-predict --model``'s;
- ``text`` and ``text-serve``: a BM25 run of small TREC files, converted, a Listformer trained
  one epoch from a tiny checkpoint and exported, its token-id export served by the stand-in
  and the test queries re-ranked through it: the run equals ``tfr-predict --model``'s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.bert_checkpoints import WORDS, write_checkpoint  # noqa: E402
from tests.test_docker import _shell_env, compose_problems  # noqa: E402
from tests.test_docker import compose as compose  # noqa: E402, F401  (the fixture)
from tests.tf_serving_fakes import FakeModel, serve_rest  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
NUM_FEATURES = 136
PORT = 8501


def readme_block(name: str) -> str:
    """The fenced block after ``<!-- user-path:NAME -->`` in README.md."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    found = re.search(rf"<!-- user-path:{name} -->\n```[a-z]*\n(.*?)```", text, re.S)
    assert found, f"README.md has no user-path:{name} block"
    return found.group(1)


def _letor_file(path, rng, queries: range) -> None:
    """Dense MSLR-style lines: a grade 0-4 that grows with feature 1 plus noise."""
    lines = []
    for qid in queries:
        for _ in range(int(rng.integers(4, 12))):
            values = rng.normal(size=NUM_FEATURES)
            grade = int(np.clip(np.round(1.5 + values[0] + 0.3 * rng.normal()), 0, 4))
            cells = " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(values))
            lines.append(f"{grade} qid:{qid} {cells}\n")
    path.write_text("".join(lines), encoding="utf-8")


def _bash(script: str, cwd, *, prelude: str = "", timeout: int = 600) -> str:
    """Runs ``script`` with bash in ``cwd`` with the installed commands first on PATH;
    fails the test with its output unless it succeeds."""
    env = {**_shell_env(), "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", prelude + script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{script}\nfailed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A working directory after the README's train block: the data, the run, the export."""
    work = tmp_path_factory.mktemp("user_path")
    fold = work / "MSLR-WEB30K" / "Fold1"
    fold.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, queries in (("train", range(1, 41)), ("vali", range(41, 51))):
        _letor_file(fold / f"{split}.txt", rng, queries)
    _letor_file(fold / "test.txt", rng, range(51, 61))
    os.symlink(os.path.join(ROOT, "docker"), work / "docker")  # run from the repository root
    # The block as written; two epochs instead of early stopping's thirty-odd.
    short = 'tfr-train() { command tfr-train "$@" --epochs 2; }\n'
    _bash(readme_block("train"), work, prelude=short)
    return work


def _latest_export(work) -> str:
    root = work / "runs" / "rankformer" / "export"
    versions = sorted(int(v) for v in os.listdir(root) if v.isdigit())
    assert versions == [1, 2]  # tfr-train's export, then tfr-export's next version
    return str(root / str(versions[-1]))


def test_the_install_block_names_make_targets_that_exist():
    for line in readme_block("install").splitlines():
        command = line.split("#")[0].split()
        if command[:1] == ["make"]:
            done = subprocess.run(["make", "-n", *command[1:]], cwd=ROOT, capture_output=True)
            assert done.returncode == 0, done.stderr
        elif command[:1] == ["source"]:
            assert os.path.isfile(os.path.join(ROOT, command[1]))


def test_the_train_block_converts_trains_evaluates_and_exports(trained):
    with open(trained / "data" / "web30k" / "manifest.json", encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["num_features"] == NUM_FEATURES
    metrics = json.loads((trained / "runs" / "rankformer" / "metrics.json").read_text())
    assert metrics["training"]["epochs_completed"] == 2
    assert os.path.isfile(os.path.join(_latest_export(trained), "saved_model.pb"))


RECORD_DOCKER = 'docker() { printf "%s\\0" "$@"; printf "\\n"; }\n'


def _serve_calls(work, *blocks) -> list[list[str]]:
    """The serve blocks' ``docker`` argument lists, once bash has expanded them."""
    out = "".join(_bash(readme_block(block), work, prelude=RECORD_DOCKER) for block in blocks)
    return [line.split("\0")[:-1] for line in out.splitlines() if line]


def test_the_serve_block_mounts_the_export_and_compose_parses_it(trained, compose):  # noqa: F811
    (run, up) = _serve_calls(trained, "serve", "serve-compose")
    assert run[0] == "run" and run[-1].startswith("tensorflow/serving:")
    options = dict(zip(run[1:-1], run[2:]))
    mount = dict(f.partition("=")[::2] for f in options["--mount"].split(","))
    assert mount["source"] == str(trained / "runs" / "rankformer" / "export")
    assert os.path.isfile(os.path.join(mount["source"], "1", "saved_model.pb"))
    assert up[0] == "compose" and up[-1] == "up"
    (command,) = [c for c in readme_block("serve-compose").splitlines() if "docker compose" in c]
    assert compose_problems(command, str(trained), compose) == []


# === The text path: BM25, a Listformer from a checkpoint, its token-id export served ===


def _trec_inputs(work, rng) -> None:
    """queries.tsv, collection.tsv and qrels.txt of the checkpoint's words: 24 queries of 2
    words, 80 documents of 6; a document's grade is how many of the query's words it holds."""
    words = WORDS[:30]
    documents = [" ".join(rng.choice(words, 6)) for _ in range(80)]
    queries = [" ".join(rng.choice(words, 2, replace=False)) for _ in range(24)]
    (work / "collection.tsv").write_text("".join(f"d{j}\t{t}\n" for j, t in enumerate(documents)))
    (work / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in enumerate(queries)))
    qrels = [
        f"{q} 0 d{j} {sum(w in d.split() for w in t.split())}\n"
        for q, t in enumerate(queries)
        for j, d in enumerate(documents)
        if set(t.split()) & set(d.split())
    ]
    (work / "qrels.txt").write_text("".join(qrels))


@pytest.mark.slow  # a Listformer trained and exported by the commands; fast: test_predict_text
def test_the_text_path_reranks_through_the_served_token_id_export(tmp_path):
    work = tmp_path
    _trec_inputs(work, np.random.default_rng(1))
    write_checkpoint(str(work / "minilm"))
    # The block as written, trained one epoch at the tiny checkpoint's token caps.
    short = 'tfr-train() { command tfr-train "$@" --epochs 1 --max-query-tokens 8 '
    short += "--max-document-tokens 16 --quiet; }\n"
    _bash(readme_block("text"), work, prelude=f"export MINILM_DIR={work}/minilm\n{short}")
    assert (work / "run.bm25.txt").read_text().strip()
    ids_export = str(work / "runs" / "rerank" / "export_token_ids")
    fake = FakeModel(ids_export, "rerank")
    specs = fake.loaded.signatures["serving_default"].structured_input_signature[1]
    assert "first_stage_scores" in specs  # BM25's score is an input of the model
    with serve_rest(fake, port=PORT) as base:
        (run, *_) = _serve_calls(work, "text-serve")
        mount = dict(f.partition("=")[::2] for f in dict(zip(run, run[1:]))["--mount"].split(","))
        assert mount["source"] == ids_export
        body = {"inputs": {"query_ids": [[2]], "document_ids": [[[3]]], "document_mask": [[True]]}}
        answer = _post(f"{base}/v1/models/rerank:predict", body)
        assert "400" in answer and "first_stage_scores" in answer
    _bash(
        "tfr-predict --model runs/rerank --input data/rerank --split test --output local.txt", work
    )
    local, remote = _read_run(work / "local.txt"), _read_run(work / "rerank.txt")
    assert local and remote.keys() == local.keys()
    for qid, scores in local.items():
        assert remote[qid].keys() == scores.keys()
        np.testing.assert_allclose(
            [remote[qid][d] for d in scores], list(scores.values()), rtol=1e-5, atol=1e-5
        )


def _post(url: str, body: dict) -> str:
    """The status and answer of a POST of ``body``."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request) as answer:
            return f"{answer.status} {answer.read().decode()}"
    except urllib.error.HTTPError as e:
        return f"{e.code} {e.read().decode()}"


@pytest.fixture(scope="module")
def served(trained):
    """The stand-in server on port 8501, serving the export's latest version as
    ``rankformer``, as TF Serving's default policy does."""
    _latest_export(trained)  # versions 1 and 2
    fake = FakeModel(str(trained / "runs" / "rankformer" / "export"), "rankformer")
    try:
        with serve_rest(fake, port=PORT):
            yield trained
    except OSError as e:  # the README's port is taken on this machine
        pytest.fail(f"cannot serve on port {PORT} for the README's requests: {e}")


@pytest.fixture(scope="module")
def local(trained) -> dict:
    """``qid -> {docid: score}`` of ``tfr-predict --model`` on the test file (its ``main`` in
    this process, which has TensorFlow loaded already)."""
    from pipelines.predict_cli import main as predict_main

    argv = ["--model", "runs/rankformer", "--input", "MSLR-WEB30K/Fold1/test.txt"]
    with contextlib.chdir(trained), contextlib.redirect_stdout(io.StringIO()):
        assert predict_main([*argv, "--output", "local.txt", "--no-progress"]) == 0
    return _read_run(trained / "local.txt")


def _read_run(path) -> dict:
    run: dict = {}
    for line in path.read_text().splitlines():
        qid, _, docid, _, score, _ = line.split()
        run.setdefault(qid, {})[docid] = float(score)
    return run


def test_the_python_block_prints_each_querys_best_documents(served, local, monkeypatch):
    monkeypatch.chdir(served)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(readme_block("python"), "README.md", "exec"), {"__name__": "readme"})
    lines = printed.getvalue().splitlines()
    assert len(lines) == 2
    for line in lines:
        qid, count, best = re.fullmatch(
            r"(\d+) (\d+) documents, best first: (\[.*\])", line
        ).groups()
        ranked = sorted(local[qid], key=local[qid].get, reverse=True)
        assert int(count) == len(ranked) and eval(best) == ranked[:3]
    assert os.path.isfile(served / "request.json")


def test_curl_and_tfr_predict_server_answer_as_the_local_export(served, local):
    blocks = readme_block("request").splitlines()
    answer = json.loads(_bash(blocks[0], served))
    outputs = answer["outputs"]
    assert set(outputs) == {"scores", "list_probs", "expected_list_label"}  # as the README shows
    _bash(blocks[1], served)
    remote = _read_run(served / "run.txt")
    assert remote.keys() == local.keys()
    for qid, scores in local.items():
        assert remote[qid].keys() == scores.keys()
        np.testing.assert_allclose(
            [remote[qid][d] for d in scores], list(scores.values()), rtol=1e-5, atol=1e-5
        )
    first = sorted(local, key=int)[0]
    np.testing.assert_allclose(
        np.array(outputs["scores"][0])[: len(local[first])],
        [local[first][d] for d in sorted(local[first], key=int)],
        rtol=1e-5,
        atol=1e-5,
    )
