"""The programs users run: thin command lines over the library, and benchmarks."""

import os

# TensorFlow's C++ start-up notices hide the commands' own output; errors still show.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__all__: list[str] = []
