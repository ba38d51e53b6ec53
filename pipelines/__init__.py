"""The programs users run: thin command lines over the library, and benchmarks."""

__all__ = ["COMMANDS"]

# setup.py's console scripts: ``tfr-<name>`` runs ``pipelines.<name>_cli``.
COMMANDS = (
    "convert",
    "train",
    "eval",
    "export",
    "predict",
    "distill",
    "experiment",
    "tune",
    "bm25",
)
