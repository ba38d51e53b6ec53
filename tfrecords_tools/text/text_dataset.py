"""A text dataset on disk: ``manifest.json`` (``kind: "text"``) beside the text ELWC
shards of ``text_elwc``, and its atomic writing."""

from __future__ import annotations

import logging
import os

from tfr_rankformer.inputs.manifest import MANIFEST_NAME, Manifest, read_manifest, write_manifest
from tfr_rankformer.text.word_tokens import TOKENIZER_DESCRIPTION
from tfrecords_tools.atomic_output import scratch_directory
from tfrecords_tools.converted_fold import MANIFEST_VERSION
from tfrecords_tools.text.text_elwc import (
    DOCUMENT_FEATURE,
    DOCUMENT_ID_FEATURE,
    FIRST_STAGE_FEATURE,
    LABEL_FEATURE,
    QUERY_FEATURE,
    QUERY_ID_FEATURE,
    TEXT_KIND,
)

logger = logging.getLogger(__name__)


def first_stage_score_source(*, scored: int, unscored: int) -> str:
    """The manifest's ``first_stage_score_source`` (MS MARCO lines: minus the rank)."""
    if scored and unscored:
        logger.warning(
            "%d documents have their run score and %d (of run lines without a score, MS "
            "MARCO's) minus their rank as %s: the two scales are mixed",
            scored,
            unscored,
            FIRST_STAGE_FEATURE,
        )
        return "run score and minus rank"
    return "minus rank" if unscored else "run score"


def is_text_dataset(directory: str) -> bool:
    """Whether ``directory`` is a converted text dataset (``kind: "text"``); ``False`` for
    a manifest that cannot be read: the feature-vector reader then names what is wrong."""
    try:
        return read_manifest(os.path.join(directory, MANIFEST_NAME), complete=False).is_text
    except (OSError, ValueError):
        return False


def text_manifest(
    parameters: dict,
    splits,
    read,
    filtered,
    max_label,
    source,
    *,
    seed: int,
    first_stage_source: str | None = None,
) -> Manifest:
    """The ``manifest.json`` of a text dataset; ``first_stage_source`` is ``None`` when
    the items hold no ``first_stage_score``."""
    from tfr_rankformer import __version__

    first_stage = {}
    examples = {
        DOCUMENT_FEATURE: {"dtype": "string", "shape": "variable", "unit": "word token"},
        DOCUMENT_ID_FEATURE: {"dtype": "string", "shape": [1]},
        LABEL_FEATURE: {"dtype": "int64", "shape": [1]},
    }
    if first_stage_source is not None:
        first_stage = {
            "first_stage_feature": FIRST_STAGE_FEATURE,
            "first_stage_score_source": first_stage_source,
        }
        examples[FIRST_STAGE_FEATURE] = {"dtype": "float32", "shape": [1]}
    context = {
        QUERY_FEATURE: {"dtype": "string", "shape": "variable", "unit": "word token"},
        QUERY_ID_FEATURE: {"dtype": "string", "shape": [1]},
    }
    content = {
        "manifest_version": MANIFEST_VERSION,
        "created_by": f"tfr-convert {__version__}",
        "kind": TEXT_KIND,
        "query_feature": QUERY_FEATURE,
        "document_feature": DOCUMENT_FEATURE,
        "label_feature": LABEL_FEATURE,
        "query_id_feature": QUERY_ID_FEATURE,
        "document_id_feature": DOCUMENT_ID_FEATURE,
        **first_stage,
        "max_relevance": int(max_label),
        "elwc": {"context": context, "examples": examples},
        "tokenizer": TOKENIZER_DESCRIPTION,
        "source": source or {"kind": "trec"},
        "parameters": parameters,
        "seed": seed,
        "input": read,
        "filtered": filtered,
        "splits": splits,
    }
    return Manifest.from_json(content)


def write_atomically(output: str, *, overwrite: bool, build) -> Manifest:
    """Swaps in as ``output`` the scratch directory ``build(scratch) -> manifest`` fills."""
    with scratch_directory(output, overwrite=overwrite) as scratch:
        manifest = build(scratch)
        write_manifest(scratch, manifest)
    return manifest
