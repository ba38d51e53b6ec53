"""Turning learning-to-rank files (LETOR, TREC, ELWC, TFDS, synthetic) into ELWC TFRecords."""

from tfrecords_tools.click_simulation import ClickConfig, simulate_clicks
from tfrecords_tools.convert import ConvertConfig, convert
from tfrecords_tools.datasets import DATASETS, DatasetNotFoundError
from tfrecords_tools.elwc_input import ElwcConfig
from tfrecords_tools.elwc_writer import ElwcEncoder, TFRecordWriter
from tfrecords_tools.letor.letor_parser import LetorFormatError, parse_letor_lines
from tfrecords_tools.letor.letor_reader import LetorFile, QueryList
from tfrecords_tools.normalization import NormalizationFitter
from tfrecords_tools.synthetic import SyntheticConfig, generate_letor

__all__ = [
    "ClickConfig",
    "ConvertConfig",
    "DATASETS",
    "DatasetNotFoundError",
    "ElwcConfig",
    "ElwcEncoder",
    "LetorFile",
    "LetorFormatError",
    "NormalizationFitter",
    "QueryList",
    "SyntheticConfig",
    "TFRecordWriter",
    "convert",
    "generate_letor",
    "parse_letor_lines",
    "simulate_clicks",
]
