"""The one rule for what is secret in a recorded config, applied the same way to every system's settings."""

from __future__ import annotations

import json

import pytest

from bench_tasks.errors import BrokerError
from bench_tasks.secrecy import REDACTED, is_secret, redacted, userinfo, without_userinfo
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
