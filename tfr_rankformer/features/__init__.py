"""The feature-vector models' family (``feature_family``) over ``tfr-convert``'s ELWC."""
