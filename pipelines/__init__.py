"""The programs users run: thin command lines over the library, and benchmarks."""

__all__: list[str] = []
