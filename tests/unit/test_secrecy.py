"""The one rule for what is secret in a recorded config, applied the same way to every system's settings."""

from __future__ import annotations

import html
import json
import stat
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from bench_tasks.errors import BrokerError, InteropError, MatrixError, SecretsError
from bench_tasks.interop.omb_workload import import_omb, matrix_yaml
from bench_tasks.lake.layout import write_json
from bench_tasks.secrecy import (
    REDACTED,
    is_secret,
    redacted,
    remember,
    scrub_exception,
    scrub_text,
    seal,
    unseal,
    userinfo,
    without_userinfo,
)
from bench_tasks.spec.kept import cell_from, cell_record
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems.kafka.security import ListenerSecurity, jaas_config


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.key",  # the PEM private key itself
        "ssl.keystore.password",
        "listener.name.client.plain.sasl.jaas.config",
        "sasl.oauthbearer.client.credentials.client.secret",
        "client_secret",
        "token",
        "auth_token",
        "AWS_SECRET_ACCESS_KEY",
        "api_key",
        "private_key",
        "seed",
    ],
)
def test_secret_keys(key: str) -> None:
    assert is_secret(key)


@pytest.mark.parametrize(
    "key",
    ["ssl.keystore.location", "ssl.keystore.type", "key.serializer", "tls.key_file", "user", "sasl.username", "listen"],
)
def test_ordinary_keys(key: str) -> None:
    assert not is_secret(key)


def test_nested_settings_are_redacted_where_they_sit() -> None:
    """nats-server passes `server` through as nested maps and lists; Kafka's are flat: one rule for both."""
    nats = {
        "listen": "127.0.0.1:4222",
        "authorization": {"user": "u", "password": "hunter2", "token": "t0k"},
        "accounts": {"A": {"users": [{"user": "a", "password": "pa55"}, {"nkey": "UABC", "seed": "SUAXYZ"}]}},
        "cluster": {"listen": "127.0.0.1:6222", "authorization": {"user": "r", "password": "r0ute"}},
    }
    kafka = {"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----...", "num.io.threads": 8, "sasl.jaas.config": "x"}
    out = redacted(nats) | redacted(kafka)
    text = json.dumps(out)
    for secret in ("hunter2", "t0k", "pa55", "SUAXYZ", "r0ute", "BEGIN PRIVATE KEY"):
        assert secret not in text
    assert out["authorization"] == {"user": "u", "password": REDACTED, "token": REDACTED}
    assert out["accounts"]["A"]["users"][0] == {"user": "a", "password": REDACTED}
    assert out["listen"] == "127.0.0.1:4222" and out["num.io.threads"] == 8
    assert nats["authorization"]["password"] == "hunter2"  # the input is left as it was


def test_jaas_options_are_escaped_and_a_line_break_is_refused() -> None:
    """Kafka reads JAAS options with java.io.StreamTokenizer: a quote or backslash is escaped, a line break
    cannot be carried and is refused with an error that names the option but never shows the value."""
    line = jaas_config("org.example.Login", username="u", password='pa"ss\\word')
    assert line == 'org.example.Login required username="u" password="pa\\"ss\\\\word";'
    with pytest.raises(BrokerError, match="password") as raised:
        jaas_config("org.example.Login", username="u", password="two\nlines")
    assert "two" not in str(raised.value)


def test_the_server_jaas_lines_escape_the_passwords(tmp_path: object) -> None:
    sec = ListenerSecurity("SASL_PLAINTEXT", "PLAIN", admin_password='a"dmin', client_password="cl\\ient")
    (line,) = [v for k, v in sec.server_settings(1, 2, tmp_path).items() if k.endswith("jaas.config")]  # type: ignore[arg-type]
    assert 'password="a\\"dmin"' in line and 'user_sixnines="cl\\\\ient"' in line


def test_userinfo_is_removed_from_every_url_of_a_text() -> None:
    text = "nats://u:p%40ss@h1:4222,tls://tok@h2:4222, see http://a:b@c/d and h3:9092"
    assert without_userinfo(text) == "nats://h1:4222,tls://h2:4222, see http://c/d and h3:9092"
    assert userinfo("nats://u:p%40ss@h1:4222") == ("u", "p@ss") and userinfo("tls://tok@h2") == ("tok", None)
    assert userinfo("nats://h1:4222") is None
    assert redacted({"routes": ["nats-route://r:pw@h:6222"]}) == {"routes": ["nats-route://h:6222"]}


def test_nats_credentials_in_a_server_url_move_into_the_client_settings() -> None:
    from bench_tasks.brokers.connections import BrokerConnection
    from bench_tasks.systems.nats.access import nats_access

    servers = "nats://bob:pw@h1:4222,nats://bob:pw@h2:4222"
    access = nats_access(BrokerConnection("n", "nats", extra={"servers": servers}))
    assert access.address == "nats://h1:4222,nats://h2:4222" and access.client == {"user": "bob", "password": "pw"}
    assert "pw" not in json.dumps(access.described) and access.described["auth"] == "user/password"
    token = nats_access(BrokerConnection("n", "nats", host="nats://t0k@h1:4222"))
    assert token.address == "nats://h1:4222" and token.client == {"token": "t0k"}
    own = nats_access(BrokerConnection("n", "nats", login="al", password="x", extra={"servers": servers}))
    assert own.client == {"user": "al", "password": "x"} and own.address == "nats://h1:4222,nats://h2:4222"
    with pytest.raises(BrokerError, match="different credentials"):
        nats_access(BrokerConnection("n", "nats", extra={"servers": "nats://a:1@h1,nats://b:2@h2"}))


# -- every system's secret keys, one rule ----------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["requirepass", "masterauth", "auth", "default_pass", "erlang.cookie", "AUTH"])
def test_every_systems_secret_keys_are_known(key: str) -> None:
    assert is_secret(key)


@pytest.mark.parametrize("key", ["ssl.client.auth", "default_user", "authorization_timeout", "maxmemory"])
def test_names_that_only_look_like_secrets_are_not(key: str) -> None:
    assert not is_secret(key)


def redis_matrix(password: str, **workload: object) -> dict:
    return {
        "name": "pw",
        "systems": [{"system": "redis", "versions": ["7.0.15"], "broker": {"server": {"requirepass": password}}}],
        "workload": {"message_size_bytes": 256, "rate_per_s": 500, "measure_s": 2, **workload},
        "measurements": ["e2e"],
    }


def test_a_cells_record_redacts_its_settings_maps_not_its_own_fields() -> None:
    """`workload.seed` is a schedule's seed, not a secret; `server.requirepass` is one. The id is the same for any
    password (it is hashed from the record), so neither an id nor a series key is a function of a password."""
    (cell,) = parse_matrix(redis_matrix("s3cret-one", seed=7), "pw").cells
    (other,) = parse_matrix(redis_matrix("s3cret-two", seed=7), "pw").cells
    recorded = cell.recorded()
    assert recorded["spec"]["broker"]["server"] == {"requirepass": REDACTED}
    assert recorded["spec"]["workload"]["seed"] == 7 and "s3cret" not in json.dumps(recorded)
    assert (cell.id, cell.series_key) == (other.id, other.series_key) and recorded["id"] == cell.id


def test_a_state_keeps_a_cells_secrets_in_a_private_file_and_gets_them_back(tmp_path: Path) -> None:
    (cell,) = parse_matrix(redis_matrix("s3cret-kept"), "pw").cells
    record = cell_record(cell, tmp_path / "work" / "secrets")
    assert "s3cret-kept" not in json.dumps(record["cell"])
    secrets_file = Path(record["cell_secrets"])
    assert (
        stat.S_IMODE(secrets_file.stat().st_mode) == 0o600 and stat.S_IMODE(secrets_file.parent.stat().st_mode) == 0o700
    )
    assert cell_from(json.loads(json.dumps(record))) == cell  # through a JSON state file and back
    secrets_file.unlink()  # its folder went at teardown: the recorded cell still validates, to be cleaned up
    assert cell_from(record).spec.broker.server["requirepass"] == REDACTED


def test_a_remembered_secret_is_scrubbed_from_every_record_form(tmp_path: Path) -> None:
    """As written, JSON-escaped (a quote in it), HTML-escaped (a report page), in a URL, in a nested record."""
    secret = 'qu"o<te>-' + "x" * 8
    remember([secret, "abc"])  # too short to search for in free text: redacted by key only
    text = f"AUTH {secret} {json.dumps(secret)} {html.escape(secret)} redis://:{secret}@h:1 abc"
    assert secret not in scrub_text(text) and json.dumps(secret)[1:-1] not in scrub_text(text)
    assert scrub_text(text).endswith(" abc") and "redis://h:1" in scrub_text(text)
    write_json(tmp_path / "r.json", {"reason": f"refused {secret}", "nested": [{"quoted": secret}]})
    assert "x" * 8 not in (tmp_path / "r.json").read_text()


def test_secrets_sealed_for_another_host_open_with_the_shared_key_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__CORE__FERNET_KEY", raising=False)
    monkeypatch.delenv("SIXNINES_SECRETS_KEY", raising=False)
    assert seal({"cell": {}, "client": {}}) is None  # nothing to seal, no key needed
    token = seal({"client": {"password": "s3cret-sealed"}})
    assert token is not None and "s3cret" not in token
    assert unseal(token) == {"client": {"password": "s3cret-sealed"}}  # the key this process made itself
    monkeypatch.setenv("SIXNINES_SECRETS_KEY", Fernet.generate_key().decode())
    with pytest.raises(SecretsError, match="SIXNINES_SECRETS_KEY"):
        unseal(token)


def test_an_exception_is_scrubbed_in_place_with_its_causes() -> None:
    remember(["s3cret-raised"])
    try:
        try:
            raise OSError(13, "denied s3cret-raised")
        except OSError as inner:
            raise BrokerError("start failed: line 'requirepass s3cret-raised'") from inner
    except BrokerError as exc:
        raised = exc
    assert scrub_exception(raised) is raised
    assert "s3cret" not in str(raised) and "s3cret" not in str(raised.__cause__)


OMB_WORKLOAD = {"name": "w", "topics": 1, "partitionsPerTopic": 1, "messageSize": 256, "producerRate": 100,
                "subscriptionsPerTopic": 1, "consumerPerSubscription": 1, "producersPerTopic": 1,
                "consumerBacklogSizeGB": 0, "testDurationMinutes": 1}  # fmt: skip
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cret-jaas";'
# Each system's OMB driver file with every place its config class takes a secret: a JAAS line and passwords in
# Kafka's properties, a login in an AMQP URI, Redis's password, a login or token in a NATS address (with a scheme
# or without one).
OMB_DRIVERS_WITH_SECRETS = {
    "kafka": {
        "driverClass": "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver",
        "commonConfig": f"sasl.jaas.config={JAAS}\nssl.truststore.password=s3cret-trust",
        "producerConfig": "acks=all\nsasl.password=s3cret-prod",
    },
    "rabbitmq": {
        "driverClass": "io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver",
        "amqpUris": ["amqp://admin:s3cret-amqp@h1:5672", "amqp://admin:s3cret-amqp@h2:5672", "amqp://h3:5672"],
    },
    "redis": {
        "driverClass": "io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver",
        "redisHost": "h1",
        "redisUser": "bench",
        "redisPass": "s3cret-redis",
    },
    "nats": {
        "driverClass": "io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver",
        "natsHostUrl": "bench:s3cret-nats@h1:4222",
        "replicationFactor": 1,
    },
    "stan": {
        "driverClass": "io.openmessaging.benchmark.driver.natsStreaming.NatsStreamingBenchmarkDriver",
        "natsHostUrl": "nats://s3cret-token@h1:4222",
    },
}


@pytest.mark.parametrize("system", OMB_DRIVERS_WITH_SECRETS)
def test_an_omb_driver_files_secrets_are_never_shown_nor_carried(system: str, tmp_path: Path) -> None:
    """Every secret an OMB driver file can hold: the import warns that it is not carried, and neither the matrix,
    its header and mapping, a warning nor what the command prints holds it."""
    from typer.testing import CliRunner

    from bench_tasks.cli import app

    driver = {"name": system, **OMB_DRIVERS_WITH_SECRETS[system]}
    imported = import_omb(OMB_WORKLOAD, "w.yaml", driver, "driver.yaml")
    assert imported.matrix.cells[0].spec.system == system
    shown = matrix_yaml(imported) + json.dumps([m.to_dict() for m in imported.mapped]) + "\n".join(imported.warnings)
    assert "s3cret" not in shown
    assert "s3cret" not in json.dumps(imported.raw["systems"])  # not carried into the matrix
    (tmp_path / "w.yaml").write_text(json.dumps(OMB_WORKLOAD))
    (tmp_path / "driver.yaml").write_text(json.dumps(driver))
    printed = CliRunner().invoke(
        app, ["import", "omb", str(tmp_path / "w.yaml"), "--driver", str(tmp_path / "driver.yaml")]
    )
    assert printed.exit_code == 0, printed.output
    assert "s3cret" not in printed.output and "not carried" in printed.output.lower()  # stdout and stderr both


def test_kafka_s_secrets_in_an_omb_driver_file_are_each_a_warning() -> None:
    driver = {"name": "Kafka", **OMB_DRIVERS_WITH_SECRETS["kafka"]}
    imported = import_omb(OMB_WORKLOAD, "w.yaml", driver, "kafka.yaml")
    assert sum("a secret" in w for w in imported.warnings) == 3
    assert "sasl.password" not in json.dumps(imported.raw["systems"])


def test_a_refused_omb_driver_file_names_its_fields_without_their_secrets() -> None:
    """A file refused for another field still never quotes a login."""
    driver = {
        "name": "RabbitMQ",
        **OMB_DRIVERS_WITH_SECRETS["rabbitmq"],
        "queueType": "STREAM",
        "bogus": "amqp://u:s3cret-x@h",
    }
    with pytest.raises(InteropError) as caught:
        import_omb(OMB_WORKLOAD, "w.yaml", driver, "rabbitmq.yaml")
    assert "bogus" in str(caught.value) and "s3cret" not in str(caught.value)


def test_a_matrix_error_names_a_secret_setting_without_quoting_it() -> None:
    with pytest.raises(MatrixError) as raised:
        parse_matrix(redis_matrix(["x", {"nested": "s3cret-err"}]), "pw")  # type: ignore[arg-type]
    assert "requirepass" in str(raised.value) and "s3cret" not in str(raised.value)


def test_a_cells_hosts_folder_holds_its_secrets_sealed_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What provision publishes for the load hosts (the lake): the recorded cell, the brokers without their client
    settings, and both secrets sealed under the deployment's key."""
    from bench_tasks.cell.hostparts import CELL_FILE, publish_cell
    from bench_tasks.topology.plan import resolve_placement

    monkeypatch.setenv("SIXNINES_SECRETS_KEY", Fernet.generate_key().decode())
    (cell,) = parse_matrix(redis_matrix("s3cret-matrix"), "pw").cells
    secrets_file = tmp_path / "brokers" / "secrets" / "client.json"
    secrets_file.parent.mkdir(parents=True)
    secrets_file.write_text(json.dumps({"password": "s3cret-cell"}))
    brokers = {"kind": "provisioned", "client": {"user": "u"}, "client_secrets": str(secrets_file), "nodes": {}}
    publish_cell(tmp_path / "hosts", cell, resolve_placement(cell), brokers)
    record = json.loads((tmp_path / "hosts" / CELL_FILE).read_text())
    assert "s3cret" not in json.dumps(record) and "client" not in record["brokers"]
    opened = unseal(record["sealed"])
    assert opened["client"] == {"user": "u", "password": "s3cret-cell"}
    assert opened["cell"] == {"/spec/broker/server/requirepass": "s3cret-matrix"}
