"""The programs users run: thin command lines over the library, and benchmarks.

Each command sets TensorFlow's log level in its ``main`` before TensorFlow is
imported (see ``tf_log_level``), so that ``--verbose`` can keep it.
"""

__all__: list[str] = []
