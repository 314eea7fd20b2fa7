"""docker-compose.yaml through the real Compose parser (compose-go, the library of the Docker Compose CLI, built
from tools/compose-config with the Go toolchain): schema, interpolation with .env.example, merge keys and
references, as `docker compose config` would check them. No Docker engine is needed (or present here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "compose-config"

pytestmark = [
    pytest.mark.alongside,
    pytest.mark.skipif(shutil.which("go") is None, reason="no Go toolchain to build tools/compose-config"),
]


@pytest.fixture(scope="module")
def compose_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = tmp_path_factory.mktemp("compose-config") / "compose-config"
    done = subprocess.run(
        ["go", "build", "-o", str(binary), "."],
        cwd=TOOL,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},  # exactly the versions go.sum pins
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return binary


def _config(binary: Path, compose: Path, env_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), str(compose), str(env_file)], capture_output=True, text=True, timeout=120)


@pytest.fixture
def filled_env(tmp_path: Path) -> Path:
    """.env.example with its secrets set, as an operator writes `.env` from it."""
    from tests.compose_check import example_env

    path = tmp_path / ".env"
    path.write_text("".join(f"{k}={v}\n" for k, v in example_env((REPO / ".env.example").read_text()).items()))
    return path


def test_docker_compose_config_accepts_the_file(compose_config: Path, filled_env: Path) -> None:
    done = _config(compose_config, REPO / "docker-compose.yaml", filled_env)
    assert done.returncode == 0, done.stderr
    model = json.loads(done.stdout)
    assert set(model["services"]) == set(yaml.safe_load((REPO / "docker-compose.yaml").read_text())["services"])
    worker = model["services"]["loadgen1"]
    assert worker["command"] == ["celery", "worker", "--queues", "loadgen_1"]
    lake_conn = json.loads(worker["environment"]["AIRFLOW_CONN_SIXNINES_LAKE_S3"])  # interpolated from the env file
    assert lake_conn["login"] == "sixnines-lake" and lake_conn["extra"]["endpoint_url"] == "http://minio:9000"
    assert model["services"]["minio"]["ports"][0]["host_ip"] == "127.0.0.1"  # published on loopback only
    assert worker["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    kafka = model["configs"]["kafka-server"]["content"]  # the shared broker settings, mounted by every node
    assert "controller.quorum.voters=1@kafka1:9093,2@kafka2:9093,3@kafka3:9093" in kafka
    assert model["services"]["kafka2"]["configs"][0]["source"] == "kafka-server"
    # `$$` reaches the container as `$`: the start script and nats-server read the secrets from their environment
    # (the script hands the SCRAM password to the storage tool in a private argument file)
    assert "password=$KAFKA_SASL_PASSWORD]" in model["services"]["kafka2"]["command"][0]
    assert 'kafka-run-class.sh "@$args"' in model["services"]["kafka2"]["command"][0]
    assert "password: $NATS_PASSWORD" in model["configs"]["nats-server"]["content"]
    kafka_conn = json.loads(worker["environment"]["AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL"])
    password = dict(line.split("=", 1) for line in filled_env.read_text().splitlines())["KAFKA_SASL_PASSWORD"]
    assert kafka_conn["password"] == password and kafka_conn["extra"]["listeners"]["SASL_SSL"].count(":9096") == 3


def test_it_rejects_what_docker_compose_rejects(compose_config: Path, tmp_path: Path, filled_env: Path) -> None:
    """A misspelt healthcheck key, a required secret left unset (the Fernet key among them), and .env.example
    copied as it is (its secrets are empty on purpose) fail with messages naming them."""
    text = (REPO / "docker-compose.yaml").read_text()
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(text.replace("      start_period: 5s\n", "      start_periode: 5s\n", 1))
    done = _config(compose_config, broken, filled_env)
    assert done.returncode == 1 and "start_periode" in done.stderr, done.stderr

    for secret in ("POSTGRES_PASSWORD", "AIRFLOW_FERNET_KEY"):
        env = tmp_path / f"no-{secret}.env"
        env.write_text(filled_env.read_text().replace(f"{secret}=", f"# {secret}="))
        done = _config(compose_config, REPO / "docker-compose.yaml", env)
        assert done.returncode == 1 and f"required variable {secret} is missing" in done.stderr, done.stderr

    done = _config(compose_config, REPO / "docker-compose.yaml", REPO / ".env.example")
    assert done.returncode == 1 and "set" in done.stderr and "in .env" in done.stderr, done.stderr
