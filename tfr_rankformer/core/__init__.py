"""The lowest layer: names, the model-family registry, config I/O, a run's directory and
layout, switches, fault points and the worker's place in a job (the one module here that
imports TensorFlow)."""
