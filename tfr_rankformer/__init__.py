"""RankFormer and listwise learning-to-rank peers on TensorFlow-Ranking.

Modules import TensorFlow lazily where they can, so that ``tfr_rankformer``
itself (and the converter, which uses its ELWC schema) stays light.
"""

from tfr_rankformer import elwc_schema

__version__ = "0.1.0"

__all__ = ["__version__", "elwc_schema"]
