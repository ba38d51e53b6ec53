"""The lowest layer: names, the model-family registry, settings, a run's directory."""
