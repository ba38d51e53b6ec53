"""Models: Keras layers, the encoder layer, the peers' layers, in-graph feature normalisation,
compiled element-wise ops, and the model builders and their settings.
"""
