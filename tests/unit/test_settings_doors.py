"""Settings that cannot open doors: no control character in any setting key or value (one check, in the settings
base, for every system's pass-through maps), and every system refusing the keys that open listeners or move an
address. The attacks are the ones found in review: a line break in a value or key that adds a config line of its
own (Redis `bind 0.0.0.0`, a second RabbitMQ listener, a second STAN monitoring port), and listener sections
passed through as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bench_tasks.spec.background import Background
from bench_tasks.spec.base import setting_path
from bench_tasks.systems.kafka.settings import KafkaBroker, KafkaClient
from bench_tasks.systems.nats.settings import NatsBroker, NatsClient
from bench_tasks.systems.rabbitmq.nodefiles import render_conf
from bench_tasks.systems.rabbitmq.settings import RabbitmqBroker, RabbitmqClient
from bench_tasks.systems.redis.nodes import node_directives
from bench_tasks.systems.redis.nodes import render_config as render_redis
from bench_tasks.systems.redis.settings import RedisBroker, RedisClient
from bench_tasks.systems.stan.server import render_config as render_stan
from bench_tasks.systems.stan.settings import StanBroker

from .matrices import one_system, problems


def refusal(model: type, **fields: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        model(**fields)
    return str(caught.value)


# -- the attacks are real: rendered as they are, each adds a line the harness did not write ------------------------
def test_a_line_break_in_a_redis_value_would_bind_every_interface() -> None:
    directives = node_directives(RedisBroker.model_construct(server={}), "127.0.0.1", 7001, Path("/w"), None, "pw")
    text = render_redis({**directives, "maxmemory": "1gb\nbind 0.0.0.0\nprotected-mode no"})
    assert "bind 0.0.0.0" in text.splitlines() and "protected-mode no" in text.splitlines()


def test_a_line_break_in_a_rabbitmq_value_would_add_a_listener() -> None:
    settings = {"listeners.tcp.default": "127.0.0.1:5672", "log.console.level": "info\nlisteners.tcp.2 = 0.0.0.0:5673"}
    text = render_conf(settings)
    assert "listeners.tcp.2 = 0.0.0.0:5673" in text.splitlines()


def test_a_line_break_in_a_stan_key_would_add_a_monitoring_port() -> None:
    text = render_stan({"http": "127.0.0.1:8222", "max_payload: 1048576\nhttp": "0.0.0.0:8222"})
    assert 'http: "0.0.0.0:8222"' in text.splitlines()


# -- control characters: refused in any key or value, naming the field --------------------------------------------
@pytest.mark.parametrize(
    ("model", "fields", "named"),
    [
        (RedisBroker, {"server": {"maxmemory": "x\nbind 0.0.0.0"}}, "server.maxmemory: control character U+000A"),
        (
            RedisBroker,
            {"server": {"maxmemory 1gb\nbind": "0.0.0.0"}},
            "control character U+000A (line feed) in the key",
        ),
        (
            RedisBroker,
            {"server": {"save": ["60 1000", "900 1\rbind 0.0.0.0"]}},
            "server.save[1]: control character U+000D",
        ),
        (RedisClient, {"connect": {"client_name": "a\x00b"}}, "connect.client_name: control character U+0000"),
        (
            RabbitmqBroker,
            {"server": {"log.console.level": "info\nlisteners.tcp.2 = 0.0.0.0:5673"}},
            "server['log.console.level']",
        ),
        (RabbitmqBroker, {"server": {"log": {"console": {"level": "info\n"}}}}, "server.log.console.level: control"),
        (
            RabbitmqBroker,
            {"erl_args": "+sbwt none\n-rabbit tcp_listeners [5673]"},
            "erl_args: control character U+000A",
        ),
        (RabbitmqClient, {"connect": {"virtual_host": "/\t"}}, "connect.virtual_host: control character U+0009 (tab)"),
        (StanBroker, {"server": {"max_payload: 1048576\nhttp": "0.0.0.0:8222"}}, "server: control character U+000A"),
        (StanBroker, {"streaming": {"hb_interval": "10s\x7f"}}, "streaming.hb_interval: control character U+007F"),
        (NatsBroker, {"server": {"jetstream": {"max_mem": "1G\nhttp: 8222"}}}, "server.jetstream.max_mem: control"),
        (NatsClient, {"connect": {"name": "bench\u2028x"}}, "connect.name: control character U+2028"),
        (KafkaBroker, {"topic": {"retention.ms": "1\n"}}, "topic['retention.ms']: control character U+000A"),
        (KafkaClient, {"producer": {"client.id": "a\x1bb"}}, "producer['client.id']: control character U+001B"),
        (Background, {"message_size_bytes": 64, "rate_per_producer_per_s": 1, "producer": {"acks\n": 1}}, "producer"),
    ],
)
def test_a_control_character_in_a_setting_is_refused_naming_it(model: type, fields: dict, named: str) -> None:
    message = refusal(model, **fields)
    assert named in message and "control character" in message


def test_a_matrix_names_the_file_and_the_field_of_a_line_break() -> None:
    (line,) = problems(one_system("redis", {"server": {"maxmemory": "x\nbind 0.0.0.0"}}))
    assert line.startswith("systems[0].broker.server: server.maxmemory: control character U+000A")
    raw = one_system("redis", {}, block={"axes": {"broker.server.maxmemory": ["1gb", "1gb\nbind 0.0.0.0"]}})
    (line,) = problems(raw)
    assert line.startswith("axes.broker.server.maxmemory[1]: '1gb\\nbind 0.0.0.0' — server.maxmemory:")


def test_printable_settings_still_pass_through() -> None:
    assert RedisBroker(server={"maxmemory": "1gb", "save": ["60 1000"]}).server["maxmemory"] == "1gb"
    assert RabbitmqBroker(erl_args="+sbwt none -kernel net_ticktime 60 -rabbit tcp_listen_options []").erl_args
    assert NatsBroker(server={"max_payload": 2097152, "authorization": {"user": "u", "password": "p w"}})
    assert KafkaClient(producer={"linger.ms": 5, "compression.type": "lz4"}).producer["linger.ms"] == 5


# -- listeners and addresses: every system refuses the keys that open one or move one -----------------------------
@pytest.mark.parametrize(
    "key",
    ["unixsocket", "unixsocketperm", "tls-port", "TLS-Port", "bind-source-addr", "replica-announce-ip",
     "slave-announce-port", "cluster-enabled", "cluster-port", "cluster-announce-ip", "cluster-announce-bus-port"],
)  # fmt: skip
def test_redis_refuses_listener_and_address_directives(key: str) -> None:
    assert f"server.{key}: set by the harness" in refusal(RedisBroker, server={key: "x"})


@pytest.mark.parametrize(
    "server",
    [
        {"listeners.tcp.2": "0.0.0.0:5673"},
        {"listeners": {"ssl": {"default": 5671}}},
        {"management.tcp.port": 15673},
        {"management": {"tcp": {"ip": "0.0.0.0"}}},
        {"management.listener.port": 15673},
        {"management.ssl.port": 15671},
        {"prometheus.tcp.port": 15692},
        {"stomp.listeners.tcp.1": 61613},
        {"mqtt.listeners.tcp.default": 1883},
        {"stream.listeners.tcp.1": 5552},
        {"stream.advertised_host": "0.0.0.0"},
        {"web_stomp.tcp.port": 15674},
        {"web_mqtt.ssl.port": 15676},
        {"distribution.listener.interface": "0.0.0.0"},
        {"distribution.listener.port_range.min": 25672},
    ],
)
def test_rabbitmq_refuses_listener_settings(server: dict[str, Any]) -> None:
    message = refusal(RabbitmqBroker, server=server)
    assert "broker.server[" in message and "listener" in message


def test_rabbitmq_refuses_a_key_that_is_not_a_setting_name() -> None:
    message = refusal(RabbitmqBroker, server={" listeners.tcp.2": "0.0.0.0:5673"})
    assert "broker.server[' listeners.tcp.2']: not a rabbitmq.conf setting name" in message


@pytest.mark.parametrize(
    "erl_args",
    [
        "-kernel inet_dist_use_interface {0,0,0,0}",
        "+sbwt none -kernel inet_dist_listen_min 25672",
        "-rabbit tcp_listeners [5673]",
        "-rabbitmq_management listener [{port,15673}]",
        "-start_epmd true",
        "-eval 'gen_tcp:listen(5673, [])'",
        "-s mymod",
        "-config /tmp/other",
    ],
)
def test_rabbitmq_erl_args_cannot_open_or_move_a_listener(erl_args: str) -> None:
    assert "erl_args: " in refusal(RabbitmqBroker, erl_args=erl_args)


@pytest.mark.parametrize(
    "key",
    ["listen", "host", "net", "port", "client_advertise", "http", "HTTP", "https", "http_port", "monitor_port",
     "https_port", "prof_port", "cluster", "gateway", "leaf", "leafnodes", "websocket", "ws", "mqtt"],
)  # fmt: skip
def test_nats_refuses_listener_keys(key: str) -> None:
    assert f"server.{key}: " in refusal(NatsBroker, server={key: {"listen": "0.0.0.0:1"}})


@pytest.mark.parametrize(
    "server",
    [
        {"https": "0.0.0.0:8222"},
        {"https_port": 8222},
        {"leafnodes": {"listen": "0.0.0.0:7422"}},
        {"cluster": {"listen": "0.0.0.0:6222"}},
        {"gateway": {"name": "g", "listen": "0.0.0.0:7222"}},
        {"websocket": {"listen": "0.0.0.0:8080", "no_tls": True}},
        {"mqtt": {"listen": "0.0.0.0:1883"}},
    ],
)
def test_stan_refuses_every_listener_of_its_embedded_server(server: dict[str, Any]) -> None:
    assert f"server.{next(iter(server))}: " in refusal(StanBroker, server=server)


@pytest.mark.parametrize("model", [NatsBroker, StanBroker])
def test_nats_keys_must_be_option_names(model: type) -> None:
    """`key: value` lines end at `;` too: a key that is not a plain name could carry a second setting."""
    message = refusal(model, server={"max_payload: 1048576; http": "0.0.0.0:8222"})
    assert "not a nats-server option name" in message


@pytest.mark.parametrize(
    "key",
    ["listeners", "advertised.listeners", "listener.security.protocol.map", "controller.listener.names",
     "inter.broker.listener.name", "control.plane.listener.name", "host.name", "port", "advertised.host.name",
     "advertised.port"],
)  # fmt: skip
def test_kafka_refuses_listener_properties(key: str) -> None:
    message = refusal(KafkaBroker, server={key: "PLAINTEXT://0.0.0.0:9092"})
    assert f"{setting_path('server', key)}: set by the harness" in message
