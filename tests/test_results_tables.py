"""The measured tables of README.md and docs/results.md are what docs/records/ print.

``python -m pipelines.benchmarks.results_tables --write`` (``make docs-results``)
rewrites every block between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->``; these tests fail when a page's block differs from
what its record prints, and show that the comparison can fail: a changed
record changes the table, and ``--check`` names a stale block.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from pipelines.benchmarks import results_tables
from pipelines.benchmarks.results_tables import (
    BLOCKS,
    README,
    REPO,
    RESULTS,
    main,
    render,
    stale_blocks,
)

RECORDS = os.path.join("docs", "records")


def _copy_repository(tmp_path) -> str:
    """The pages and the records, copied under ``tmp_path``; returns that root."""
    shutil.copytree(os.path.join(REPO, RECORDS), tmp_path / RECORDS)
    for page in (README, RESULTS):
        shutil.copy(os.path.join(REPO, page), tmp_path / page)
    return str(tmp_path)


def _rewrite_lines(path, change) -> None:
    """Rewrites a JSON-lines record, each object through ``change``."""
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(change(line)) + "\n" for line in lines)


def _block(text: str, name: str) -> str:
    start = text.index(f"<!-- results:{name} -->")
    return text[start : text.index(f"<!-- /results:{name} -->", start)]


def test_the_pages_hold_what_the_records_print():
    assert stale_blocks(REPO) == []
    with open(os.path.join(REPO, README), encoding="utf-8") as f:
        readme = f.read()
    assert render("headline").strip() in _block(readme, "headline")
    assert {page for page, _ in BLOCKS.values()} == {README, RESULTS}


def test_the_headline_has_a_row_per_record_with_its_reprint_command():
    rows = [line for line in render("headline").splitlines() if line.startswith("| ")][1:]
    records = [
        "reference_parity_mq2008_30.jsonl",
        "reference_parity_mq2008_200.jsonl",
        "web30k_clicks_3epochs --reprint",
        "cranfield_rerank --reprint",
    ]
    assert len(rows) == len(records)
    for row, record in zip(rows, records):
        assert f"docs/records/{record}" in row


def test_a_changed_parity_record_changes_the_tables(tmp_path):
    root = _copy_repository(tmp_path)
    before = render("mq2008-30", root), render("headline", root)
    assert "| rankformer | ours | 68.92 ± 1.10 |" in before[0]

    def better(line: dict) -> dict:
        if (line["side"], line["model"], line["fold"]) == ("ours", "rankformer", 1):
            line["ndcg_y@10"] += 5.0  # the mean over 5 folds moves by 1.00
        return line

    _rewrite_lines(tmp_path / RECORDS / "reference_parity_mq2008_30.jsonl", better)
    after = render("mq2008-30", root), render("headline", root)
    assert "| rankformer | ours | 69.92 ±" in after[0]
    assert "rankformer 69.92 ±" in after[1] and "rankformer 68.92 ±" in before[1]


def test_a_missing_run_is_an_error_naming_the_record(tmp_path):
    root = _copy_repository(tmp_path)
    path = tmp_path / RECORDS / "reference_parity_mq2008_30.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[1:]), encoding="utf-8")
    with pytest.raises(ValueError, match="reference_parity_mq2008_30.jsonl lacks 1 run"):
        render("mq2008-30", root)


def test_the_cranfield_table_follows_its_record_fold_by_fold(tmp_path):
    root = _copy_repository(tmp_path)
    path = tmp_path / RECORDS / "cranfield_rerank" / "cranfield_rerank.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    folds = [line for line in lines if line.get("record") == "fold"]
    extra = json.loads(json.dumps(folds[0]))
    extra["fold"] = max(f["fold"] for f in folds) + 1
    extra["runs"] = {}
    extra["columns"] = {
        "bm25": {"ndcg@10": 10.0},
        "a_new_column": {"ndcg@10": 12.5},  # on this fold only
    }
    path.write_text("".join(json.dumps(x) + "\n" for x in [*lines, extra]), encoding="utf-8")
    table = render("cranfield", root)
    assert f"| {extra['fold']} | 45 (43) | 10.00 |" in table
    assert "a_new_column NDCG@10" in table and "12.50 (1 fold)" in table
    assert "12.50 (1)" in render("headline", root)


def test_a_changed_speed_record_changes_the_ratio(tmp_path):
    root = _copy_repository(tmp_path)

    def halved(line: dict) -> dict:
        if line.get("stage", "").startswith("released"):
            line["lists_per_sec"] /= 2
        return line

    before = render("headline", root)
    _rewrite_lines(tmp_path / RECORDS / "web30k_clicks_3epochs" / "web30k_scale.jsonl", halved)
    after = render("headline", root)
    assert "theirs 1,022 at 128 lists per batch: 3.26x" in before
    assert "theirs 511 at 128 lists per batch: 6.53x" in after
    assert "ours / theirs 6.53" in render("web30k-clicks", root)


def test_check_names_a_stale_block_and_write_mends_it(tmp_path, capsys):
    root = _copy_repository(tmp_path)
    page = tmp_path / RESULTS
    text = page.read_text(encoding="utf-8")
    stale = text.replace(
        "| rankformer | ours | 68.92 ± 1.10 |", "| rankformer | ours | 70.00 ± 1.10 |"
    )
    assert stale != text
    page.write_text(stale, encoding="utf-8")
    assert main(["--check", "--root", root]) == 1
    err = capsys.readouterr().err
    assert "stale block docs/results.md: mq2008-30;" in err
    assert "README.md" not in err
    assert main(["--write", "--root", root]) == 0
    assert page.read_text(encoding="utf-8") == text
    assert main(["--check", "--root", root]) == 0


def test_check_names_a_missing_or_unknown_block(tmp_path, capsys):
    root = _copy_repository(tmp_path)
    page = tmp_path / README
    text = page.read_text(encoding="utf-8")
    text = text.replace("<!-- results:headline -->", "<!-- results:headlines -->")
    page.write_text(text.replace("<!-- /results:headline -->", "<!-- /results:headlines -->"))
    assert main(["--check", "--root", root]) == 1
    err = capsys.readouterr().err
    assert "README.md: headline (missing)" in err
    assert "README.md: headlines (no such block)" in err


def test_every_block_is_on_its_page():
    for name, (page, _) in results_tables.BLOCKS.items():
        with open(os.path.join(REPO, page), encoding="utf-8") as f:
            assert f"<!-- results:{name} -->" in f.read(), (page, name)
