"""Option groups of ``tfr-convert``: the ELWC input, click simulation, synthetic data
and the Apache Beam runner."""

from __future__ import annotations

import argparse

from pipelines.flag_table import add_flag
from tfrecords_tools.synthetic import LENGTH_SPREADS

__all__ = [
    "BEAM_FLAGS",
    "add_beam_arguments",
    "add_click_arguments",
    "add_elwc_arguments",
    "add_synthetic_arguments",
]

# The Beam group's flags (``runner`` first), which the local converter refuses.
BEAM_FLAGS = (
    "runner",
    "train_files",
    "vali_files",
    "test_files",
    "max_bad_lines",
    "bad_lines",
    "quantile_epsilon",
)


def add_elwc_arguments(p: argparse.ArgumentParser) -> None:
    """``--elwc-*``: how an ``elwc:`` input is read."""
    elwc = p.add_argument_group("ELWC input (--input elwc:...), one feature per name per item")
    elwc.add_argument(
        "--elwc-features",
        metavar="LIST",
        help="the item features to read, in order, comma-separated: names, globs "
        "('custom_features_*', ordered by number) or ranges ('custom_features_{1..136}')",
    )
    elwc.add_argument(
        "--elwc-label",
        metavar="NAME",
        help="item feature holding the graded label (float or int64). Default: relevance",
    )
    elwc.add_argument(
        "--elwc-context",
        metavar="LIST",
        help="context features to copy into each output list's context, comma-separated "
        "(lists that lack one are counted in the manifest)",
    )
    elwc.add_argument(
        "--elwc-qid",
        metavar="NAME",
        help="int64 context feature holding the query id. Default: lists are numbered 1, 2, "
        "... per split in file order",
    )
    elwc.add_argument(
        "--elwc-missing-value",
        type=float,
        metavar="X",
        help="value of an item feature a record lacks (counted in the manifest). Default: 0",
    )


def add_click_arguments(p: argparse.ArgumentParser) -> None:
    """``--simulate-clicks`` and the click model's parameters (``ClickConfig``), ``--seed``."""
    sim = p.add_argument_group("click simulation (RankFormer paper, Sec. 6.1 and App. C)")
    sim.add_argument(
        "--simulate-clicks",
        action="store_true",
        default=None,
        help="replace labels with simulated implicit feedback; the explicit label "
        "stays in 'relevance'",
    )
    sim.add_argument("--sample-size", type=int, help="N_s, items per simulated list. Default: 16")
    sim.add_argument(
        "--bootstraps", type=int, help="N_b, simulated lists per original list. Default: 10"
    )
    sim.add_argument("--kappa", type=float, help="share of purchase intent. Default: 0.1")
    sim.add_argument("--click-noise", type=float, help="eps, noise click rate. Default: 0.1")
    sim.add_argument(
        "--purchase-label",
        type=int,
        help="label of a purchase (the paper: 2; the authors' code: 4). Default: 2",
    )
    add_flag(sim, "seed", help="seed of every random step. Default: 0")


def add_synthetic_arguments(p: argparse.ArgumentParser) -> None:
    """``--synthetic-*``: the generated lists of ``--input synthetic``."""
    syn = p.add_argument_group("synthetic data (--input synthetic)")
    add_flag(syn, "synthetic_lists")
    syn.add_argument(
        "--synthetic-list-size",
        type=int,
        help="mean list size. Default: 40 (synthetic-text: 20 documents)",
    )
    syn.add_argument(
        "--synthetic-length-spread",
        choices=LENGTH_SPREADS,
        help="how list lengths spread around their mean: 'default' (the default; log-normal, "
        "sigma 0.6, within 2 and 6 x the mean) or 'web30k' (MSLR-WEB30K's heavy right tail: "
        "log-normal, sigma 0.75, within 1 and 10.4 x the mean, i.e. 1 to 1,251 items at "
        "--synthetic-list-size 120, median about 0.76 x the mean)",
    )


def add_beam_arguments(p: argparse.ArgumentParser) -> None:
    """``--runner`` and the options of the Beam converter."""
    beam = p.add_argument_group(
        "Apache Beam (pip install .[beam]); any further options go to Beam's PipelineOptions"
    )
    beam.add_argument(
        "--runner",
        choices=["DirectRunner", "FlinkRunner", "SparkRunner", "DataflowRunner"],
        help="convert with an Apache Beam pipeline on this runner instead of locally (same "
        "output; lists are grouped by qid across files; invalid lines are set aside). Only "
        "with --runner are unknown options accepted, as Beam pipeline options "
        "(--project, --region, --temp_location, --flink_master, --environment_type, ...)",
    )
    beam.add_argument(
        "--train-files",
        action="append",
        metavar="GLOB",
        help="with --runner, instead of --input: train files as a glob (local, gs://, ...; "
        ".gz accepted), repeatable; files are read in pattern order, sorted within a pattern",
    )
    beam.add_argument("--vali-files", action="append", metavar="GLOB", help="vali files, as above")
    beam.add_argument("--test-files", action="append", metavar="GLOB", help="test files, as above")
    beam.add_argument(
        "--max-bad-lines",
        type=int,
        help="with --runner: invalid lines allowed (each is set aside in the dead-letter file); "
        "more fail the run, leaving no output. Default: 0",
    )
    beam.add_argument(
        "--bad-lines",
        metavar="FILE",
        help="with --runner: the dead-letter file (path, line, message per line). "
        "Default: OUTPUT.bad_lines.txt",
    )
    beam.add_argument(
        "--quantile-epsilon",
        type=float,
        help="with --runner: rank error bound of the quantile sketches as a share of the "
        "train items. Default: 1 / --num-quantiles",
    )
