"""Distilling a trained teacher (any exported run) into a LightGBM student."""
