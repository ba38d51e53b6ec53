"""The builtin model families and models with their defaults and traits, which
``model_families`` registers."""

from __future__ import annotations

from tfr_rankformer.core.model_spec import ModelFamily, ModelSpec

_FEATURES = "tfr_rankformer.features.feature_family:FeatureFamily"
FAMILIES = (
    ModelFamily("features", "features", _FEATURES, default=True),
    ModelFamily(
        "text",
        "text",
        "tfr_rankformer.text.text_family:TextFamily",
        # Its fused pieces and its measured quality are float32's.
        mixed_precision=False,
        architecture="tfr_rankformer.text.listformer_config:ListformerConfig",
    ),
    ModelFamily("gbdt", "gbdt", "tfr_rankformer.gbdt.gbdt_family:GbdtFamily"),
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
# The Listformer from a checkpoint (--init-from): a whole top 100 is too long a sequence for
# a pretrained encoder's step, so batches hold two lists of 32 documents at 128 tokens.
PRETRAINED_TEXT_TRAINING = dict(
    learning_rate=1e-4,
    list_size=32,
    batch_items=2 * 32 * 128,
    epochs=10,
    patience=3,
)
# The listwide loss's default weight: the released code's 1 is the paper's best, 0.25.
_RANKFORMER_ALPHA = {"released": 1.0, "paper": 0.25}
# allRank's published configurations.
_ALLRANK_TRAINING = dict(
    RELEASED_TRAINING,
    epochs=100,
    batch_size=64,
    batch_items=64 * 240,  # allRank's 64 slates of 240
    loss_scaling="paper",
    optimizer="adam",
    weight_decay=0.0,
    lr_schedule="step_decay",
)
# The Listformer from scratch: ApproxNDCG (the thesis's loss), sized for a small model.
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
        # The paper's best (Sec. 6.2); [CLS] only with a list head, as released.
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
        # Pobrotyn et al.'s best MSLR-WEB30K setting, per loss allRank's published one.
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
        # The RankFormer's encoder and heads; items attend to [CLS] and summary tokens only.
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
        # A small, CPU-sized encoder; window 256 per side is Longformer-base's 512.
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
    ),
    # GBDTs: ``gbdt`` takes the ``preset`` setting; the others are their preset.
    ModelSpec("gbdt", "gbdt"),
    ModelSpec("gbdt-1k", "gbdt"),
    ModelSpec("gbdt-10k", "gbdt"),
)
