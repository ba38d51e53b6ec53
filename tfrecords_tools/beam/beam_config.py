"""The settings of a conversion on Apache Beam, declared once for ``tfr-convert``'s options
and the manifest; this module loads no Beam."""

from __future__ import annotations

import dataclasses

from tfr_rankformer.core.config_io import setting
from tfrecords_tools.convert import ConvertConfig

RUNNERS = ("DirectRunner", "FlinkRunner", "SparkRunner", "DataflowRunner")
_FILES = ("train_files", "vali_files", "test_files")


@dataclasses.dataclass(frozen=True)
class BeamConfig:
    """Settings of a conversion on Apache Beam (each flag's help says what it is);
    ``convert.input`` is ``files`` when the splits are given as patterns."""

    convert: ConvertConfig
    runner: str | None = setting(
        None,
        "convert with an Apache Beam pipeline on this runner instead of locally (same "
        "output; lists are grouped by qid across files; invalid lines are set aside). Only "
        "with --runner are unknown options accepted, as Beam pipeline options (--project, "
        "--region, --temp_location, --flink_master, --environment_type, ...)",
        choices=RUNNERS,
    )
    pipeline_args: tuple[str, ...] = ()
    max_bad_lines: int = setting(
        0,
        "with --runner: invalid lines allowed (each is set aside in the dead-letter file); "
        "more fail the run, leaving no output",
    )
    bad_lines_output: str | None = setting(
        None,
        "with --runner: the dead-letter file (path, line, message per line). Default: "
        "OUTPUT.bad_lines.txt",
        metavar="FILE",
        flag="--bad-lines",
    )
    train_files: tuple[str, ...] = setting(
        (),
        "with --runner, instead of --input: train files as a glob (local, gs://, ...; .gz "
        "accepted), repeatable; files are read in pattern order, sorted within a pattern",
        action="append",
        metavar="GLOB",
    )
    vali_files: tuple[str, ...] = setting(
        (), "vali files, as above", action="append", metavar="GLOB"
    )
    test_files: tuple[str, ...] = setting(
        (), "test files, as above", action="append", metavar="GLOB"
    )
    quantile_epsilon: float | None = setting(
        None,
        "with --runner: rank error bound of the quantile sketches as a share of the train "
        "items. Default: 1 / --num-quantiles",
    )

    def __post_init__(self):
        object.__setattr__(self, "runner", self.runner or "DirectRunner")
        for name in _FILES:  # the command line gives lists
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.runner not in RUNNERS:
            raise ValueError(f"Unknown runner {self.runner!r}; choose from {list(RUNNERS)}")
        if not isinstance(self.max_bad_lines, int) or self.max_bad_lines < 0:
            raise ValueError(f"`max_bad_lines` must be an int >= 0, got {self.max_bad_lines!r}")
        if self.quantile_epsilon is not None and not 0 < self.quantile_epsilon < 1:
            raise ValueError(f"`quantile_epsilon` must lie in (0, 1), got {self.quantile_epsilon}")
        if self.convert.input.startswith("tfds:"):
            raise ValueError("--runner reads LETOR text; tfds: inputs convert without --runner")
        if self.train_files and self.convert.input != "files":
            raise ValueError("give the input either as --input or as --train-files, not both")
        if (self.vali_files or self.test_files) and not self.train_files:
            raise ValueError("--vali-files and --test-files need --train-files")

    @property
    def epsilon(self) -> float:
        return self.quantile_epsilon or 1.0 / self.convert.num_quantiles

    def patterns(self) -> dict[str, tuple[str, ...]]:
        given = {split: getattr(self, f"{split}_files") for split in ("train", "vali", "test")}
        return {split: patterns for split, patterns in given.items() if patterns}

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        del out["convert"]
        out["quantile_epsilon"] = self.epsilon
        return out
