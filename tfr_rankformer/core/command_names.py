"""The names the commands offer besides the models, without TensorFlow so that ``--help``
is quick (``tests/test_quiet_start.py`` checks them against the registries)."""

from __future__ import annotations

# How the Listformer's encoder computes its attention (``listformer_layers``).
ATTENTIONS = ("blocked", "dense_masked", "full")

# The presets of ``gbdt.PRESETS``.
GBDT_PRESET_NAMES = ("gbdt", "gbdt-1k", "gbdt-10k")

# One line per item-score loss of ``losses.SCORE_LOSSES``, for --help and the README.
LOSS_SUMMARIES = {
    "softmax": "softmax cross-entropy with the labels as target, -y^T log softmax(s) "
    "(TF-Ranking SoftmaxLoss; the RankFormer's)",
    "listnet": "ListNet, softmax cross-entropy with the labels' softmax as target, "
    "-softmax(y)^T log softmax(s) (allRank's listNet)",
    "ordinal": "one sigmoid per label level, score = sum of the level probabilities "
    "(TF-Ranking OrdinalLoss)",
    "approx_ndcg": "ApproxNDCG, NDCG with smoothed ranks (TF-Ranking ApproxNDCGLoss)",
    "listmle": "ListMLE, likelihood of the ideal permutation (TF-Ranking ListMLELoss)",
    "ranknet": "RankNet, pairwise logistic (TF-Ranking PairwiseLogisticLoss)",
    "lambdarank": "LambdaRank, pairwise logistic with NDCG swap weights",
    "ndcg_loss2pp": "LambdaLoss NDCG-Loss2++ with mu = 10, pairwise logistic",
    "rmse": "RMSE of max_label * sigmoid(score) against the labels, per list",
}

# A distillation's rows: the teacher, its GBDT student, a same-size GBDT on the labels.
DISTILL_ROWS = ("teacher", "student", "gbdt_labels")

# tfr-experiment's default grid (alpha 1 and 4 are the paper's 0.25 and 1).
DEFAULT_EXPERIMENT_MODELS = (
    "gbdt,gbdt-1k,gbdt-10k,mlp,rankformer:alpha=0,rankformer:alpha=1,rankformer:alpha=4"
)

# tfr-experiment's default grid on text data: the first stage and the re-ranker.
DEFAULT_TEXT_EXPERIMENT_MODELS = "bm25,listformer"

# tfr-experiment's name for BM25 (bm25s) scoring a text dataset's lists.
BM25_MODEL = "bm25"

# How per-list losses make a batch's loss: the released code's, or Eq. 9 as printed.
LOSS_SCALINGS = ("released", "paper")

# Where Adam's epsilon is added (``optimizers``): as torch.optim, or as Keras.
ADAM_EPSILONS = ("pytorch", "keras")

# Weight initialisation schemes of ``initializers``.
INITIALIZATIONS = ("pytorch", "keras")

# What a serving signature does with an item it cannot score (``serving_checks``).
INVALID_ITEM_POLICIES = ("reject", "score-last")
