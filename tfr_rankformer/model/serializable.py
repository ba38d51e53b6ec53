"""Registering the project's Keras objects so that SavedModels and checkpoints reload."""

from __future__ import annotations

import inspect

import tensorflow as tf

_LIBRARIES = ("keras", "tf_keras", "tensorflow", "builtins")


def _arguments(cls) -> list[str]:
    """The named constructor arguments of ``cls`` and of its bases above Keras's own."""
    names: list[str] = []
    for klass in cls.__mro__:
        if klass.__module__.startswith(_LIBRARIES) or "__init__" not in vars(klass):
            continue
        for p in inspect.signature(klass.__init__).parameters.values():
            named = p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            if named and p.name != "self" and p.name not in names:
                names.append(p.name)
    return names


def serializable(cls):
    """Registers the Keras object ``cls``, with a ``get_config`` (unless it has one) adding
    each constructor argument's same-named attribute to its base's config."""
    if "get_config" not in vars(cls):
        names = _arguments(cls)

        def get_config(self):
            config = super(cls, self).get_config()
            config.update({name: getattr(self, name) for name in names})
            return config

        cls.get_config = get_config
    return tf.keras.utils.register_keras_serializable(package="tfr_rankformer")(cls)
