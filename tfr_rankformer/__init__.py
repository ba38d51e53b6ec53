"""RankFormer and listwise learning-to-rank peers on TensorFlow-Ranking."""

from tfr_rankformer import elwc_schema

__version__ = "0.1.0"

__all__ = ["__version__", "elwc_schema"]
