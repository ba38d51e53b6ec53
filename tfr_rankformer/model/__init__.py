"""Models: Keras layers, in-graph feature normalisation, the model builders and settings."""
