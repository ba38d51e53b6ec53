"""Training: ``TrainConfig``, the one training loop, its plan, memory model and callbacks."""
