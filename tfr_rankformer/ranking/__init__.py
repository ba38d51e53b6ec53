"""Ranking losses, ranking metrics and the evaluation of a model on whole lists."""
