"""Turning learning-to-rank files into ELWC TFRecords.

Streaming LETOR parsing with validation, TF-Ranking-style ELWC input, dataset
layouts, implicit-click simulation, normalisation fitting, the ELWC writer and
a synthetic generator.
"""

from tfrecords_tools.click_simulation import ClickConfig, simulate_clicks
from tfrecords_tools.convert import MANIFEST_NAME, ConvertConfig, convert
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
    "MANIFEST_NAME",
    "NormalizationFitter",
    "QueryList",
    "SyntheticConfig",
    "TFRecordWriter",
    "convert",
    "generate_letor",
    "parse_letor_lines",
    "simulate_clicks",
]
