"""Training: ``TrainConfig``, the one training loop, its plan and memory model, optimizers
and callbacks."""
