"""Integration on the real LETOR 4.0 MQ2008 folds, where they are present."""

from __future__ import annotations

import json
import os

import pytest

from pipelines.convert_cli import main
from tests.conftest import REAL_DATA

MQ2008 = os.path.join(os.environ.get("TFR_DATA_DIR", REAL_DATA), "MQ2008")
pytestmark = pytest.mark.skipif(
    not os.path.isdir(os.path.join(MQ2008, "Fold1")),
    reason=f"MQ2008 is not at {MQ2008} (set TFR_DATA_DIR to the folder holding MQ2008/)",
)

# Published LETOR 4.0 counts for MQ2008 Fold1.
EXPECTED = {"train": (471, 9630), "vali": (157, 2707), "test": (156, 2874)}


def test_fold1_counts_match_the_published_ones(tmp_path):
    out = tmp_path / "mq2008"
    code = main(
        [
            "--input",
            "MQ2008",
            "--data-dir",
            os.path.dirname(MQ2008),
            "--fold",
            "1",
            "--output",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    with open(out / "manifest.json", encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["num_features"] == 46 and manifest["max_relevance"] == 2
    for split, (lists, items) in EXPECTED.items():
        entry = manifest["splits"][split]
        assert (entry["num_lists"], entry["num_items"]) == (lists, items)
        assert sum(entry["label_histogram"].values()) == items
        assert set(entry["label_histogram"]) <= {"0", "1", "2"}
        assert len(entry["input"]["sha256"]) == 64
    # Lists whose items are all irrelevant are kept and counted, not dropped.
    assert manifest["splits"]["train"]["list_label_histogram"]["0"] > 0


def test_fold1_with_simulated_clicks(tmp_path):
    out = tmp_path / "mq2008"
    code = main(
        [
            "--input",
            os.path.join(MQ2008),
            "--fold",
            "1",
            "--simulate-clicks",
            "--output",
            str(out),
            "--no-progress",
            "--seed",
            "3",
        ]
    )
    assert code == 0
    with open(out / "manifest.json", encoding="utf-8") as f:
        train = json.load(f)["splits"]["train"]
    assert train["input_lists"] == 471 and train["num_lists"] == 4710
    assert set(train["label_histogram"]) <= {"0", "1", "2"}
    assert train["relevance_histogram"]["2"] > 0
