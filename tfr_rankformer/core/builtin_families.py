"""The builtin model families and models, declared once (``model_families`` registers
them).

Three families: the feature-vector models (the RankFormer, its peers and
allRank's ranker), the text models (the Listformer) and LightGBM's GBDTs.
Each model's architecture defaults (``ModelConfig``), training defaults
(``TrainConfig``) and traits are declared here and nowhere else. No
TensorFlow: the plug-ins and builders are named by path and imported when used.
"""

from __future__ import annotations

from tfr_rankformer.core.model_spec import (
    FEATURES_KIND,
    GBDT_KIND,
    TEXT_KIND,
    ModelFamily,
    ModelSpec,
)

__all__ = [
    "FAMILIES",
    "FALLBACK_TRAINING",
    "MODELS",
    "PRETRAINED_TEXT_TRAINING",
    "RELEASED_TRAINING",
]

# === Families ===

FAMILIES = (
    ModelFamily(
        "features",
        FEATURES_KIND,
        runs="tfr_rankformer.run_kinds:FeatureRuns",
        run_family="tfr_rankformer.training.feature_family:FeatureFamily",
        default=True,
    ),
    ModelFamily(
        "text",
        TEXT_KIND,
        runs="tfr_rankformer.run_kinds:TextRuns",
        # It loads TF Text's tokenizer, so it is imported only for text runs.
        run_family="tfr_rankformer.text.text_family:TextFamily",
        # Its fused pieces and its measured quality are float32's.
        mixed_precision=False,
    ),
    ModelFamily("gbdt", GBDT_KIND, runs="tfr_rankformer.run_kinds:GbdtRuns"),
)

# === Training defaults ===

# The RankFormer family follows the authors' released code.
RELEASED_TRAINING = dict(
    loss="softmax",
    eval_batch_size=256,
    epochs=200,
    batch_size=2048,
    # The released batch of 2048 lists of 16 sampled items, as a budget.
    batch_items=2048 * 16,
    loss_scaling="released",
    optimizer="adamw",
    weight_decay=0.1,
    lr_schedule="epoch_inverse_sqrt",
)
# Settings every model shares when neither it nor the user gives one.
FALLBACK_TRAINING = dict(learning_rate=1e-3, patience=20)
# The Listformer started from a pretrained checkpoint (--init-from) re-ranks a
# first stage's top 100 per query: a pretrained encoder's step on a whole list
# is a 12,800-token sequence (about 8 GiB of activations for MiniLM), so
# training lists keep 32 documents (judged relevant ones first) in batches of
# 8,192 padded tokens (two such lists at 128 tokens), at a fine-tuning rate.
PRETRAINED_TEXT_TRAINING = dict(
    learning_rate=1e-4,
    list_size=32,
    batch_items=2 * 32 * 128,
    epochs=10,
    patience=3,
)
# The listwide loss's weight when none is given, per loss scaling: the
# released code's own script uses strength 1, which its README equates with
# the paper's alpha 0.25 (the paper's best). The Listformer's head is optional.
_RANKFORMER_ALPHA = {"released": 1.0, "paper": 0.25}
# allRank's published configurations: Adam at 1e-3 without weight decay, x0.1
# after half of 100 epochs, batches of 64 lists, per-list sums as allRank's
# ListNet averages.
_ALLRANK_TRAINING = dict(
    loss="softmax",
    eval_batch_size=256,
    epochs=100,
    batch_size=64,
    batch_items=64 * 240,  # allRank's 64 slates of 240
    loss_scaling="paper",
    optimizer="adam",
    weight_decay=0.0,
    lr_schedule="step_decay",
)
# The Listformer, trained from scratch on text lists: ApproxNDCG (the
# thesis's loss); batches, epochs and weight decay sized for a small model.
_LISTFORMER_TRAINING = dict(
    loss="approx_ndcg",
    eval_batch_size=16,
    epochs=20,
    batch_size=16,
    loss_scaling="released",
    optimizer="adamw",
    weight_decay=0.01,
    lr_schedule="epoch_inverse_sqrt",
)

# === Models ===

_ENCODER = dict(num_layers=3, num_heads=1, ff_dim=512, dropout=0.25, head_hidden=128)

MODELS = (
    # Feature vectors.
    ModelSpec(
        "rankformer",
        "features",
        has_list_head=True,
        builder="tfr_rankformer.model.models:build_rankformer",
        # The RankFormer paper's best (Sec. 6.2); [CLS] and the z_i || z_CLS head
        # only with a list head, as in the released code.
        architecture=dict(_ENCODER, cls_token=True),
        training=RELEASED_TRAINING,
        alpha=_RANKFORMER_ALPHA,
        cls_token_with_list_head=True,
    ),
    ModelSpec(
        "transformer",
        "features",
        builder="tfr_rankformer.model.models:build_transformer",
        # The released code's alpha = 0 model: the encoder alone, h_s(z_i).
        architecture=dict(_ENCODER, cls_token=False),
        training=RELEASED_TRAINING,
    ),
    ModelSpec(
        "mlp",
        "features",
        builder="tfr_rankformer.model.models:build_mlp",
        architecture=dict(dropout=0.25, mlp_units=(512, 256, 128)),
        training=RELEASED_TRAINING,
        attention=False,
    ),
    ModelSpec(
        "context_aware",
        "features",
        builder="tfr_rankformer.model.models:build_context_aware",
        # Pobrotyn et al.'s best MSLR-WEB30K setting (allRank's ordinal
        # configuration), initialised as allRank does (Xavier-uniform weights);
        # per loss, allRank's published configuration where it differs
        # (reproducibility/configs/contextaware_web30k/ndcgloss2pp.json).
        architecture=dict(
            num_layers=4, num_heads=2, ff_dim=512, dropout=0.4, d_fc=144, init="keras"
        ),
        loss_architecture={"ndcg_loss2pp": dict(d_fc=128, num_heads=4, dropout=0.3)},
        training=_ALLRANK_TRAINING,
        item_width="d_fc",
        takes_cls_token=False,
        positional_encoding=True,
        slate_size=240,  # allRank's slates
    ),
    ModelSpec(
        "summary_token_ranker",
        "features",
        has_list_head=True,
        builder="tfr_rankformer.model.models:build_summary_token_ranker",
        # This project's item-level ranker: the RankFormer's encoder and heads, with
        # [CLS] and learned summary tokens as the only tokens the items attend to.
        architecture=dict(_ENCODER, global_tokens=4, cls_token=True),
        training=RELEASED_TRAINING,
        summary_tokens=True,
    ),
    # Text.
    ModelSpec(
        "listformer",
        "text",
        has_list_head=True,
        builder="tfr_rankformer.text.listformer:build_listformer",
        # Trained from scratch: a small encoder, CPU-sized; the thesis fine-tuned
        # Longformer-base (12 layers, width 768), which cannot be fetched here.
        # Window 256 per side is Longformer-base's 512 in all.
        architecture=dict(
            num_layers=2,
            num_heads=2,
            ff_dim=256,
            dropout=0.1,
            head_hidden=128,
            width=128,
            attention_window=256,
            max_positions=512,
            init="keras",
            copied_layers=False,
        ),
        training=_LISTFORMER_TRAINING,
        item_width="width",
        heads_split_width=True,
    ),
    # GBDTs.
    # ``gbdt`` takes the ``preset`` setting; the others name their preset.
    ModelSpec("gbdt", "gbdt"),
    ModelSpec("gbdt-1k", "gbdt", preset="gbdt-1k"),
    ModelSpec("gbdt-10k", "gbdt", preset="gbdt-10k"),
)
