"""RankFormer and listwise learning-to-rank peers on TensorFlow-Ranking.

Modules import TensorFlow lazily where they can, so that ``tfr_rankformer``
itself (and the converter, which uses its ELWC schema) stays light. Importing
it asks TensorFlow for its pooled CPU allocator (see ``cpu_allocator``).
"""

from tfr_rankformer.cpu_allocator import use_pooled_cpu_allocator

use_pooled_cpu_allocator()

from tfr_rankformer import elwc_schema  # noqa: E402

__version__ = "0.1.0"

__all__ = ["__version__", "elwc_schema"]
