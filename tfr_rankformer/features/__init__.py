"""The feature-vector models' family (``feature_family``): the RankFormer, its peers and
allRank's ranker, over ``tfr-convert``'s ELWC lists."""
