"""``tfr-convert``'s library function: LETOR folds to ELWC TFRecord shards and a manifest."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import shutil
import time

from tfr_rankformer.core.config_io import from_dict, require_positive_ints, setting
from tfr_rankformer.core.elwc_schema import SPLITS
from tfr_rankformer.inputs.empty_splits import log_empty_splits
from tfr_rankformer.inputs.manifest import Manifest, write_manifest
from tfrecords_tools.atomic_output import scratch_directory
from tfrecords_tools.block_processing import default_workers, parse_workers
from tfrecords_tools.click_simulation import ClickConfig
from tfrecords_tools.converted_fold import (
    fold_manifest,
    letor_entry,
    log_reordered_lines,
    relative_paths,
)
from tfrecords_tools.datasets import DATASETS
from tfrecords_tools.elwc_input import ELWC_PREFIX, ElwcConfig
from tfrecords_tools.letor.letor_parser import DUPLICATE_POLICIES
from tfrecords_tools.letor.letor_reader import DEFAULT_CHUNK_BYTES, LetorFile
from tfrecords_tools.list_processing import ListPolicy
from tfrecords_tools.normalization import NORMALIZATIONS, NormalizationFitter
from tfrecords_tools.sources import Source, dataset_sizes, resolve_source, select_folds
from tfrecords_tools.split_writer import SplitTarget, write_letor_split, write_query_lists
from tfrecords_tools.synthetic import SyntheticConfig

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ConvertConfig:
    """Settings of one conversion (each field's help says what it is)."""

    input: str = setting(
        dataclasses.MISSING,
        "a directory in LETOR layout (Fold1..N/{train,vali,test}.txt or one such set; .gz "
        "accepted), a dataset name looked up under --data-dir, $TFR_DATA_DIR and the working "
        f"directory ({', '.join(DATASETS)}), tfds:NAME read through tensorflow-datasets (e.g. "
        "tfds:mslr_web/30k_fold1), or 'synthetic' (generated WEB30K-shaped data with "
        "list-context effects), or elwc:DIR, elwc:GLOB or elwc:train=GLOB,vali=GLOB,test=GLOB "
        "for TF-Ranking-style ELWC TFRecords (files are placed in splits by their names' "
        "prefix train, vali/valid/eval, test; see --elwc-*); text ranking data to the text "
        "ELWC: 'trec' (files given by --queries, --collection, --qrels, --run), trec:DIR "
        "(those files found in DIR by their usual names) or 'synthetic-text' (generated lists "
        "whose relevance depends on the list)",
    )
    output: str = setting(
        dataclasses.MISSING,
        "output directory (must not exist, or be empty, unless --overwrite; a failure leaves "
        "it as it was)",
    )
    data_dir: str | None = setting(
        None, "where dataset names and TFDS data are looked up first (then $TFR_DATA_DIR)"
    )
    fold: int | None = setting(None, "fold to convert. Default: 1")
    all_folds: bool = setting(
        False, "'all': convert every fold, each into OUTPUT/FoldN", flag="--folds"
    )
    shards: int = setting(1, "TFRecord files per split")
    max_list_size: int | None = setting(
        None,
        "subsample longer lists to this many items (seeded; counted in the manifest); for "
        "text inputs, keep the run's first N documents. Default: keep every item",
    )
    min_list_size: int = setting(1, "drop lists with fewer items (counted in the manifest)")
    num_features: int | None = setting(
        None,
        "feature count d (lines beyond it are errors). Default: the dataset's, else the "
        "largest index in the files, which may be at most 4 x the largest index left after "
        "setting aside the widest line of every 100 (or 100): one far wider line is an error",
    )
    max_relevance: int | None = setting(
        None,
        "highest explicit label. Default: the dataset's, else the largest label in the files",
    )
    simulate_clicks: bool = setting(
        False,
        "replace labels with simulated implicit feedback; the explicit label stays in 'relevance'",
    )
    clicks: ClickConfig = ClickConfig()
    normalize: str = setting(
        "quantile",
        "normalisation the models apply in-graph (all are fitted on train and stored). "
        "Default: quantile, the paper's",
        choices=NORMALIZATIONS,
    )
    quantile_sample_size: int = setting(
        100_000, "train items sampled (reservoir) for the quantiles. Default: 100000"
    )
    num_quantiles: int = setting(1000, "quantiles per feature")
    seed: int = setting(0, "seed of every random step")
    overwrite: bool = setting(
        False,
        "replace an existing output directory, but only one tfr-convert wrote (its "
        "manifest.json, shards, source/, FoldN/): anything else in it is refused, never "
        "deleted",
    )
    synthetic: SyntheticConfig = SyntheticConfig()
    tfds_download: bool = setting(
        False, "let tensorflow-datasets download and prepare a missing tfds: dataset"
    )
    chunk_bytes: int = setting(
        DEFAULT_CHUNK_BYTES,
        "size of the blocks read at once, in MiB; bounds memory. Default: 8",
        flag="--chunk-mb",
    )
    workers: int | None = setting(
        None,
        "processes that parse and encode LETOR blocks in parallel (1: all in this process). "
        "Default: one per core, at most 4",
    )
    duplicate_features: str = setting(
        "error",
        "a LETOR line that repeats a feature index: 'error', or keep the value that comes "
        "'last' (what TF-Ranking's LibSVM reader does) or 'first'; such lines are counted in "
        "the manifest. Features listed out of order are always accepted (sorted and counted)",
        choices=DUPLICATE_POLICIES,
    )
    elwc: ElwcConfig = ElwcConfig()

    def __post_init__(self):
        if not self.input:
            raise ValueError(
                "`input` must name a directory, a dataset, tfds:NAME, elwc:FILES or synthetic"
            )
        if not self.output:
            raise ValueError("`output` must be a directory path")
        if self.fold is not None and (self.fold < 1 or self.all_folds):
            raise ValueError(
                f"`fold` must be >= 1 and not combined with all folds, got {self.fold}"
            )
        require_positive_ints(
            self, "shards", "min_list_size", "quantile_sample_size", "num_quantiles", "chunk_bytes"
        )
        require_positive_ints(
            self, "max_list_size", "num_features", "max_relevance", "workers", optional=True
        )
        if self.duplicate_features not in DUPLICATE_POLICIES:
            raise ValueError(
                f"Unknown duplicate-feature policy {self.duplicate_features!r}; "
                f"choose from {DUPLICATE_POLICIES}"
            )
        if self.normalize not in NORMALIZATIONS:
            raise ValueError(
                f"Unknown normalisation {self.normalize!r}; choose from {NORMALIZATIONS}"
            )

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        # Tuples as JSON lists, so the returned manifest equals the one read back.
        out["elwc"] = {k: list(v) if isinstance(v, tuple) else v for k, v in out["elwc"].items()}
        return out

    @classmethod
    def from_json(cls, values: dict) -> ConvertConfig:
        nested = {"clicks": ClickConfig, "synthetic": SyntheticConfig, "elwc": ElwcConfig}
        return from_dict(cls, values, nested=nested, what="conversion settings")


def list_policy(config: ConvertConfig, max_relevance: int) -> ListPolicy:
    clicks = config.clicks if config.simulate_clicks else None
    return ListPolicy(
        config.max_list_size, config.min_list_size, clicks, max_relevance, config.seed
    )


def normalization_fitter(config: ConvertConfig, num_features: int) -> NormalizationFitter:
    return NormalizationFitter(
        num_features,
        seed=config.seed,
        sample_size=config.quantile_sample_size,
        num_quantiles=config.num_quantiles,
    )


def _file_progress(description: str, total: int | None, enabled: bool):
    """A tqdm bar over a file's bytes and its ``(bytes read, items)`` update (items/s shown)."""
    from tqdm.auto import tqdm

    disable = not enabled or None
    bar = tqdm(
        total=total, desc=description, unit="B", unit_scale=True, disable=disable, leave=False
    )
    start = time.perf_counter()

    def update(bytes_read: int, items: int) -> None:
        bar.update(bytes_read - bar.n)
        rate = items / max(time.perf_counter() - start, 1e-9)
        bar.set_postfix_str(f"{items:,} items, {rate:,.0f} items/s", refresh=False)

    return bar, update


class _FoldWriter:
    """Converts the splits of one fold into shards and its normalisation statistics."""

    def __init__(
        self, config: ConvertConfig, source: Source, sizes, scratch, progress, pool, workers: int
    ):
        self.config, self.source, self.scratch = config, source, scratch
        self.progress, self.pool = progress, pool
        # Two blocks per worker in flight keep them busy while bounding memory.
        self.window = 2 * workers
        self.num_features = sizes.num_features
        self.policy = list_policy(config, sizes.max_relevance)
        self.fitter = normalization_fitter(config, self.num_features)
        self.parts_dir = os.path.join(scratch, ".parts")

    def run(self, files: dict, out_dir: str) -> tuple[dict, dict]:
        """Writes every split in ``files``; returns ``(split entries, normalisation)``."""
        os.makedirs(self.parts_dir, exist_ok=True)
        splits, normalization = {}, None
        # Created here, after the parsing workers were forked.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as background:
            for split in (s for s in SPLITS if s in files):
                splits[split] = self._split(split, files[split], out_dir)
                if split == "train":
                    # Sorting the sample for the quantiles overlaps the other splits.
                    normalization = background.submit(self.fitter.result, self.config.normalize)
            result = normalization.result() if normalization else None
        shutil.rmtree(self.parts_dir)
        return splits, result or self.fitter.result(self.config.normalize)

    def _split(self, split: str, file: str, out_dir: str) -> dict:
        config, source = self.config, self.source
        target = SplitTarget(self.parts_dir, out_dir, split, config.shards)
        fitter = self.fitter if split == "train" else None
        started = time.perf_counter()
        try:
            lists = source.tfds or source.elwc
            if lists is not None:
                where = f"tfds:{lists.name}[{split}]" if source.tfds else source.dataset
                stats = write_query_lists(
                    lists.lists(split),
                    num_features=self.num_features,
                    where=where,
                    target=target,
                    policy=self.policy,
                    fitter=fitter,
                )
                entry_input = lists.describe(split)
            else:
                stats, entry_input = self._letor(file, target, fitter)
        finally:
            names = target.close()
        seconds = time.perf_counter() - started
        logger.info(
            "%s: %d lists, %d items written from %d lists, %d items in %.1fs (%.0f items/s)",
            split,
            stats.num_lists,
            stats.num_items,
            stats.input_lists,
            stats.input_items,
            seconds,
            stats.input_items / max(seconds, 1e-9),
        )
        entry = stats.as_dict(config.simulate_clicks)
        entry["num_features"] = self.num_features
        entry["input"] = entry_input
        entry["files"] = dict(zip(names, target.counts))
        return entry

    def _letor(self, path: str, target: SplitTarget, fitter) -> tuple:
        """Writes one LETOR file's split; returns its counts and the manifest's input entry."""
        letor = LetorFile(path, chunk_bytes=self.config.chunk_bytes)
        name = f"{target.split} {os.path.basename(path)}"
        bar, on_progress = _file_progress(name, letor.size_bytes, self.progress)
        try:
            stats, parsing = write_letor_split(
                letor,
                num_features=self.num_features,
                target=target,
                policy=self.policy,
                fitter=fitter,
                pool=self.pool,
                window=self.window,
                on_progress=on_progress,
                duplicates=self.config.duplicate_features,
            )
        finally:
            bar.close()
        if parsing.fast_items < stats.input_items:
            logger.info(
                "%s: %d of %d items were not dense LETOR lines (sparse, unsorted, irregular "
                "or commented) and took the slower reference parser",
                path,
                stats.input_items - parsing.fast_items,
                stats.input_items,
            )
        log_reordered_lines(path, parsing.unsorted_lines, parsing.duplicate_lines)
        path = relative_paths(os.path.abspath(letor.path), self.scratch)
        entry = letor_entry(path, letor, parsing)
        return stats, entry


def convert(config: ConvertConfig, *, progress: bool = True) -> list[Manifest]:
    """Converts the input to ELWC shards; returns one manifest per fold, no output on error."""
    # Only LETOR text uses parsing workers.
    reads_letor = not config.input.startswith(("tfds:", ELWC_PREFIX))
    workers = (config.workers or default_workers()) if reads_letor else 1
    with scratch_directory(config.output, overwrite=config.overwrite) as scratch:
        # The workers are forked before any thread starts.
        with parse_workers(workers) as (pool, workers):
            manifests = _convert_folds(config, scratch, progress, pool, workers)
    return manifests


def _convert_folds(
    config: ConvertConfig, scratch: str, progress: bool, pool, workers: int
) -> list[Manifest]:
    """Writes every selected fold under ``scratch``; returns their manifests."""
    source = resolve_source(
        config.input,
        data_dir=config.data_dir,
        scratch=scratch,
        synthetic=config.synthetic,
        tfds_download=config.tfds_download,
        elwc=config.elwc,
        max_relevance=config.max_relevance,
    )
    folds = select_folds(source, fold=config.fold, all_folds=config.all_folds)
    sizes = dataset_sizes(
        source, folds, num_features=config.num_features, max_relevance=config.max_relevance
    )
    manifests = []
    for fold, files in folds.items():
        out_dir = os.path.join(scratch, f"Fold{fold}") if config.all_folds and fold else scratch
        os.makedirs(out_dir, exist_ok=True)
        writer = _FoldWriter(config, source, sizes, scratch, progress, pool, workers)
        splits, normalization = writer.run(files, out_dir)
        manifest = fold_manifest(config, source, fold, sizes, splits, normalization)
        write_manifest(out_dir, manifest)
        shown = os.path.join(config.output, f"Fold{fold}") if out_dir != scratch else config.output
        log_empty_splits(manifest, output_dir=shown)
        manifests.append(manifest)
    return manifests
