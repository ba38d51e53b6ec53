"""The derived ``get_config`` of ``serializable`` layers: a layer rebuilt from its config
takes the same arguments, its bases' included."""

import tensorflow as tf

from tfr_rankformer.model.serializable import serializable


@serializable
class _Base(tf.keras.layers.Layer):
    def __init__(self, width: int = 4, *, dropout: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.width, self.dropout = width, dropout


@serializable
class _Child(_Base):
    def __init__(self, count: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.count = count


def test_a_layer_rebuilt_from_its_config_has_every_argument():
    layer = _Child(count=3, width=7, dropout=0.5, name="child")
    config = layer.get_config()
    assert {k: config[k] for k in ("count", "width", "dropout", "name")} == {
        "count": 3,
        "width": 7,
        "dropout": 0.5,
        "name": "child",
    }
    rebuilt = tf.keras.utils.deserialize_keras_object(tf.keras.utils.serialize_keras_object(layer))
    assert type(rebuilt) is _Child
    assert (rebuilt.count, rebuilt.width, rebuilt.dropout) == (3, 7, 0.5)
