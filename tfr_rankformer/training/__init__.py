"""Training: ``TrainConfig``, the one training loop, its plan and memory model, optimizers,
callbacks, and the feature-vector family's plug-in points.
"""
