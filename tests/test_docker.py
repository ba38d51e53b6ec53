"""The docker files: base images match the pinned versions, copied paths exist."""

from __future__ import annotations

import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def _pin(package):
    return re.search(rf'"{re.escape(package)}==([0-9.]+)"', _read("setup.py")).group(1)


def test_base_images_match_the_pinned_versions():
    tensorflow = _pin("tensorflow")
    training = re.search(
        r"^FROM tensorflow/tensorflow:([0-9.]+)-gpu", _read("docker/Dockerfile"), re.M
    ).group(1)
    # The GPU image's TensorFlow has the pin's minor version; pip installs the pin.
    assert training.split(".")[:2] == tensorflow.split(".")[:2]
    serving_pin = _pin("tensorflow-serving-api")
    serving = re.search(
        r"^FROM tensorflow/serving:([0-9.]+)", _read("docker/serving.Dockerfile"), re.M
    ).group(1)
    assert serving == serving_pin
    compose = re.search(r"image: tensorflow/serving:([0-9.]+)", _read("docker/compose.yaml"))
    assert compose.group(1) == serving_pin


def test_every_copied_path_exists():
    for name in ("docker/Dockerfile", "docker/serving.Dockerfile", "docker/beam.Dockerfile"):
        for line in _read(name).splitlines():
            if line.startswith("COPY "):
                sources = line.split()[1:-1]
                for source in sources:
                    assert os.path.exists(os.path.join(ROOT, source)), f"{name}: {source}"


def test_training_image_runs_tfr_train():
    assert 'ENTRYPOINT ["tfr-train"]' in _read("docker/Dockerfile")
    assert "ENTRYPOINT" not in _read("docker/serving.Dockerfile")  # TF Serving's own


def test_beam_image_keeps_the_sdk_entry_point_and_installs_the_extra():
    beam = _read("docker/beam.Dockerfile")
    assert re.search(r"^FROM apache/beam_python3\.11_sdk:[0-9.]+$", beam, re.M)
    assert 'pip install --no-cache-dir ".[beam]"' in beam
    # The SDK harness's own entry point (its boot program) must stay.
    assert not re.search(r"^ENTRYPOINT", beam, re.M)
