"""Training defaults that depend on the model, readable without TensorFlow.

``TrainConfig`` fills the fields left ``None`` from these; the command lines'
help texts state them from the same values.
"""

from __future__ import annotations

__all__ = [
    "RELEASED_DEFAULTS",
    "MODEL_DEFAULTS",
    "PRETRAINED_TEXT_DEFAULTS",
    "FALLBACK_DEFAULTS",
    "ALPHA_DEFAULTS",
]

# Settings whose default depends on the model: the RankFormer family follows the
# authors' released code; context_aware follows allRank's published
# configurations (Adam at 1e-3 without weight decay, x0.1 after half of 100
# epochs, batches of 64 lists, per-list sums as allRank's ListNet averages).
RELEASED_DEFAULTS = dict(
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
MODEL_DEFAULTS = {
    "rankformer": RELEASED_DEFAULTS,
    "transformer": RELEASED_DEFAULTS,
    "mlp": RELEASED_DEFAULTS,
    "summary_token_ranker": RELEASED_DEFAULTS,
    # The Listformer, trained from scratch on text lists: ApproxNDCG (the
    # thesis's loss); batches, epochs and weight decay sized for a small model.
    "listformer": dict(
        loss="approx_ndcg",
        eval_batch_size=16,
        epochs=20,
        batch_size=16,
        loss_scaling="released",
        optimizer="adamw",
        weight_decay=0.01,
        lr_schedule="epoch_inverse_sqrt",
    ),
    "context_aware": dict(
        loss="softmax",
        eval_batch_size=256,
        epochs=100,
        batch_size=64,
        batch_items=64 * 240,  # allRank's 64 slates of 240
        loss_scaling="paper",
        optimizer="adam",
        weight_decay=0.0,
        lr_schedule="step_decay",
    ),
}
# The Listformer started from a pretrained checkpoint (--init-from) re-ranks a
# first stage's top 100 per query: a pretrained encoder's step on a whole list
# is a 12,800-token sequence (about 8 GiB of activations for MiniLM), so
# training lists keep 32 documents (judged relevant ones first) in batches of
# 8,192 padded tokens (two such lists at 128 tokens), at a fine-tuning rate.
PRETRAINED_TEXT_DEFAULTS = dict(
    learning_rate=1e-4,
    list_size=32,
    batch_items=2 * 32 * 128,
    epochs=10,
    patience=3,
)
# The listwide loss's weight when none is given, per loss scaling: the
# released code's own script uses strength 1, which its README equates with
# the paper's alpha 0.25 (the paper's best). The Listformer's head is optional.
ALPHA_DEFAULTS = {"released": {"rankformer": 1.0}, "paper": {"rankformer": 0.25}}
# Settings every model shares when neither it nor the user gives one.
FALLBACK_DEFAULTS = dict(learning_rate=1e-3, patience=20)
