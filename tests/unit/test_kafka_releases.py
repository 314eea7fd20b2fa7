"""Kafka releases without a broker: the list read from a stand-in Maven Central (its listing and poms are input
data), what a release lacks named by coordinates, which mode each release runs in, and what a cell of a release
that cannot do something is refused with."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench_tasks.errors import BrokerError, MatrixError
from bench_tasks.releases import Release, current, refresh
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems.kafka import central, release
from bench_tasks.systems.kafka.cluster import KafkaCluster
from bench_tasks.systems.kafka.modes import mode_of
from bench_tasks.systems.kafka.security import ListenerSecurity

CENTRAL = central.MAVEN_CENTRAL + "/org/apache/kafka"
REAL_ASK = central._ask


def pom(*modules: str, version: str) -> bytes:
    """A pom depending on Kafka `modules` at `version` (and on a test-scoped one, which a run never needs)."""
    deps = "".join(
        f"<dependency><groupId>org.apache.kafka</groupId><artifactId>{m}</artifactId><version>{version}</version>"
        "<scope>runtime</scope></dependency>"
        for m in modules
    )
    test = "<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-test</artifactId><scope>test</scope>"
    test += f"<version>{version}</version></dependency>"
    return f'<project xmlns="http://maven.apache.org/POM/4.0.0"><dependencies>{deps}{test}</dependencies></project>'.encode()


def served(version: str, *, without: str = "") -> dict[str, bytes]:
    """What Central serves of a release: kafka_2.13 -> kafka-server -> kafka-tools-api, kafka-clients."""
    modules = {
        "kafka_2.13": pom("kafka-clients", "kafka-server", version=version),
        "kafka-server": pom("kafka-tools-api", "kafka-clients", version=version),
        "kafka-tools-api": pom(version=version),
        "kafka-clients": pom(version=version),
    }
    files = {}
    for module, body in modules.items():
        if module != without:
            files[f"{CENTRAL}/{module}/{version}/{module}-{version}.pom"] = body
            files[f"{CENTRAL}/{module}/{version}/{module}-{version}.jar"] = b"PK"
    return files


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    yield tmp_path / "cache"


@pytest.fixture
def fake_central(cache: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Maven Central as a dict of URL -> body; returns the URLs asked, in order."""
    files: dict[str, bytes] = {}
    asked: list[str] = []
    versions = "".join(f"<version>{v}</version>" for v in ("2.3.1", "2.4.0", "3.2.3", "4.3.2", "4.4.0"))
    metadata = f"<metadata><versioning><versions>{versions}</versions></versioning></metadata>".encode()

    def download(url: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(metadata)

    def ask(method: str, url: str) -> tuple[int, bytes]:
        asked.append(url)
        return (200, files[url]) if url in files else (404, b"")

    monkeypatch.setattr(release, "_download", download)
    monkeypatch.setattr(central, "_ask", ask)
    for version in ("2.4.0", "3.2.3", "4.3.2"):
        files |= served(version)
    files |= served("4.4.0", without="kafka-tools-api")
    return asked


def test_every_release_from_2_4_is_listed_and_one_that_lacks_a_module_names_it(fake_central: list[str]) -> None:
    listed = release.list_releases()
    assert [r.version for r in listed] == ["4.4.0", "4.3.2", "3.2.3", "2.4.0"]  # 2.3.1 has no Scala 2.13 build
    missing = {r.version: r.missing for r in listed}
    assert missing["4.4.0"] == "org.apache.kafka:kafka-tools-api:4.4.0 is not on Maven Central"
    assert missing["4.3.2"] is missing["2.4.0"] is None
    assert not any("kafka-test" in url for url in fake_central)  # a test dependency is never needed to run
    before = len(fake_central)
    release.list_releases()  # complete releases are remembered; only the incomplete one is asked again
    assert {url.split("/")[-2] for url in fake_central[before:]} == {"4.4.0"}


def test_an_unreachable_central_is_an_error_a_run_answers_with_its_cached_list(
    fake_central: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    refresh("kafka", release.list_releases)

    def refused(method: str, path: str) -> tuple[int, bytes]:
        raise ConnectionRefusedError("Connection refused")

    monkeypatch.setattr(central, "_ask", REAL_ASK)  # Central's answers come from the network again, which refuses
    monkeypatch.setattr(central, "_request", refused)
    monkeypatch.setattr(central, "_complete_before", lambda version: False)  # nothing remembered: Central is asked
    with pytest.raises(BrokerError, match=r"cannot check the Kafka releases' modules on Maven Central: .*refused"):
        release.list_releases()
    used = current("kafka", release.list_releases, max_age_s=0)
    assert used.resolve("latest") == "4.3.2" and "could not be reached" in (used.offline or "")


def test_latest_is_the_newest_release_that_can_be_assembled(fake_central: list[str]) -> None:
    listed = refresh("kafka", release.list_releases)
    assert listed.resolve("latest") == "4.3.2"
    assert listed.problem("4.4.0") == (
        "kafka 4.4.0 cannot be assembled: org.apache.kafka:kafka-tools-api:4.4.0 is not on Maven Central"
    )


def test_fetching_a_release_that_lacks_a_module_is_refused_naming_it(cache: Path) -> None:
    refresh("kafka", lambda: [Release("4.4.0", "Maven Central", "org.apache.kafka:kafka-tools-api:4.4.0 is not on…")])
    env = {**os.environ, "SIXNINES_CACHE": str(cache)}
    done = subprocess.run(
        [sys.executable, "-m", "bench_tasks", "brokers", "fetch", "kafka", "4.4.0"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "kafka 4.4.0 cannot be assembled: org.apache.kafka:kafka-tools-api:4.4.0" in done.stderr
    assert not (cache / "kafka" / "4.4.0").exists()  # refused before Maven is asked


@pytest.mark.parametrize(
    ("version", "mode"),
    [("2.4.0", "zookeeper"), ("2.8.2", "zookeeper"), ("3.2.3", "zookeeper"), ("3.3.0", "kraft"), ("4.4.0", "kraft")],
)
def test_releases_from_3_3_run_in_kraft_mode_older_ones_with_zookeeper(version: str, mode: str) -> None:
    assert mode_of(version) == mode


def test_a_zookeeper_era_broker_is_a_broker_of_its_zookeeper() -> None:
    three = KafkaCluster("2.8.2", 3, {"x.y": "z"}, "w").settings(2, 9092, None, Path("/data"), "127.0.0.1:2181")
    assert three["broker.id"] == 2 and three["zookeeper.connect"] == "127.0.0.1:2181"
    assert three["listeners"] == "PLAINTEXT://127.0.0.1:9092" and three["x.y"] == "z"
    assert three["controlled.shutdown.enable"] is False  # every node stops at once: nobody to hand leaders to
    assert not {"process.roles", "node.id", "controller.quorum.voters", "controller.listener.names"} & set(three)
    secured = KafkaCluster("2.8.2", 1, {}, "w", security="sasl_plaintext", sasl_mechanism="PLAIN")
    settings = secured.settings(1, 9092, None, Path("/data"), "127.0.0.1:2181")
    assert settings["listeners"] == "CLIENT://127.0.0.1:9092"
    assert settings["listener.security.protocol.map"] == "CLIENT:SASL_PLAINTEXT"


def test_scram_users_of_a_zookeeper_era_cluster_are_written_to_its_zookeeper() -> None:
    security = ListenerSecurity.of("sasl_plaintext", "SCRAM-SHA-256")
    admin, client = security.zookeeper_scram_args("127.0.0.1:2181")
    assert admin[:2] == ["--zookeeper", "127.0.0.1:2181"] and admin[admin.index("--entity-name") + 1] == "admin"
    assert client[-1] == f"SCRAM-SHA-256=[password={security.client_password}]"
    assert ListenerSecurity.of("sasl_plaintext", "PLAIN").zookeeper_scram_args("127.0.0.1:2181") == []


def kafka_matrix(version: str, client: dict | None = None, **workload: object) -> dict:
    return {
        "name": "releases",
        "systems": [{"system": "kafka", "versions": [version], "client": client or {}}],
        "workload": {"message_size_bytes": 256, "rate_per_s": 100, "measure_s": 1, **workload},
        "measurements": ["e2e"],
    }


@pytest.mark.parametrize(
    ("version", "client", "refusal"),
    [
        ("3.4.1", {"security": "sasl_plaintext", "sasl_mechanism": "SCRAM-SHA-256"}, "which has SCRAM users from 3.5"),
        ("2.6.3", {"security": "ssl"}, "Kafka 2.6.3 reads no PEM keystore (KIP-651, from 2.7), and"),
        ("3.2.3", {"security": "sasl_ssl"}, "Kafka 3.2.3 reads a PEM key only encrypted, and the harness makes"),
    ],
)
def test_what_a_release_cannot_do_is_refused_per_release(cache: Path, version: str, client: dict, refusal: str) -> None:
    listed = ("3.5.0", "3.4.1", "3.3.0", "3.2.3", "2.6.3")
    refresh("kafka", lambda: [Release(v, "Maven Central") for v in listed])
    with pytest.raises(MatrixError, match=re.escape(refusal)):
        parse_matrix(kafka_matrix(version, client), "releases")
    assert parse_matrix(kafka_matrix("3.5.0", client), "releases").cells  # a later release does it


def test_a_zookeeper_era_broker_is_not_restarted(cache: Path) -> None:
    """Started again at once, it would find its registration still in ZooKeeper and stop; a kill is fine."""
    refresh("kafka", lambda: [Release(v, "Maven Central") for v in ("3.3.0", "3.2.3")])
    raw = kafka_matrix("3.2.3", measure_s=2)
    raw["systems"][0]["broker"] = {"brokers": 3, "replication_factor": 3}
    raw["faults"] = [{"at_s": 1, "action": "restart"}]
    with pytest.raises(MatrixError, match=r"faults: restart: a Kafka 3\.2\.3 broker \(ZooKeeper mode, before 3\.3\)"):
        parse_matrix(raw, "releases")
    raw["faults"] = [{"at_s": 1, "action": "kill"}]
    assert parse_matrix(raw, "releases").cells
    raw["systems"][0]["versions"], raw["faults"] = ["3.3.0"], [{"at_s": 1, "action": "restart"}]
    assert parse_matrix(raw, "releases").cells


def test_a_zookeeper_era_release_has_scram_users(cache: Path) -> None:
    """KRaft 3.3 and 3.4 have none; ZooKeeper-era brokers read them from their ZooKeeper."""
    refresh("kafka", lambda: [Release("2.4.0", "Maven Central")])
    client = {"security": "sasl_plaintext", "sasl_mechanism": "SCRAM-SHA-512"}
    assert parse_matrix(kafka_matrix("2.4.0", client), "releases").cells


def test_a_zookeeper_era_cluster_keeps_its_nodes_on_one_host(cache: Path) -> None:
    refresh("kafka", lambda: [Release(v, "Maven Central") for v in ("3.3.2", "3.2.3")])
    placed = kafka_matrix("3.2.3", placement={"broker": ["b1", "b2", "b3"], "producers": ["l"], "consumers": ["l"]})
    placed["systems"][0]["broker"] = {"brokers": 3}
    placed["hosts"] = {h: {"netns": h} for h in ("b1", "b2", "b3", "l")}
    with pytest.raises(MatrixError, match=r"Kafka 3\.2\.3 runs with ZooKeeper .* use a release from 3\.3"):
        parse_matrix(placed, "releases")
    placed["systems"][0]["versions"] = ["3.3.2"]
    assert parse_matrix(placed, "releases").cells
