"""Provisioned brokers ask for a password, and never run as anyone else's: real servers on loopback refuse a client
without the cell's credential, the harness's own clients have it, nobody else can read it, and the commands that
would run code as the harness's user are gone."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path
from typing import Any

import nats
import pika
import pytest
import redis
from nats.errors import NoServersError

from bench_tasks.systems.rabbitmq.nodes import RabbitCluster, amqp_urls
from bench_tasks.systems.rabbitmq.settings import RabbitmqBroker
from bench_tasks.systems.redis.nodes import CONFIG_NAME, RedisServers
from bench_tasks.systems.redis.settings import RedisBroker
from bench_tasks.systems.stan.provision import start_server
from bench_tasks.systems.stan.server import CONFIG_NAME as STAN_CONFIG
from bench_tasks.systems.stan.settings import StanBroker
from tests.integration.helpers import REDIS_RELEASES, STAN_RELEASE

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]  # brokers only, no cell


def private(path: Path) -> bool:
    """Readable by its owner only, in a folder only its owner can enter."""
    return not (stat.S_IMODE(path.stat().st_mode) & 0o077 or stat.S_IMODE(path.parent.stat().st_mode) & 0o077)


@pytest.mark.parametrize("version", REDIS_RELEASES[:2])
def test_redis_asks_for_the_cells_password_and_has_no_module_or_debug(tmp_path: Path, version: str) -> None:
    with RedisServers(version, RedisBroker(replicas=1), tmp_path) as servers:
        assert servers.endpoint is not None and len(servers.password) >= 24
        stranger = redis.Redis(port=servers.ports[1], socket_timeout=2, protocol=2)
        with pytest.raises(redis.AuthenticationError):
            stranger.ping()
        stranger.close()
        admin = redis.Redis.from_url(servers.login_url(), socket_timeout=2, protocol=2)
        assert admin.ping() and admin.wait(1, 2000) == 1  # the replica authenticated with its primary too
        for command in (("MODULE", "LIST"), ("DEBUG", "SLEEP", "0")):
            with pytest.raises(redis.ResponseError, match="unknown command"):
                admin.execute_command(*command)
        admin.close()
        configs = [servers.folder(i) / CONFIG_NAME for i in (1, 2)]
        assert all(private(path) and servers.password in path.read_text() for path in configs)
        recorded = "".join(node.config for node in servers.endpoint.nodes)
        assert servers.password not in recorded and "requirepass <redacted>" in recorded


def test_rabbitmq_has_the_cells_user_and_no_guest(tmp_path: Path) -> None:
    with RabbitCluster("latest", RabbitmqBroker(), tmp_path) as cluster:
        assert cluster.endpoint is not None
        url = amqp_urls(cluster.endpoint.url)[0]
        assert "@" not in cluster.endpoint.url  # the recorded address carries no user
        for user, password in (("guest", "guest"), (cluster.user.username, "not-the-password")):
            params = pika.URLParameters(url)
            params.credentials = pika.PlainCredentials(user, password)
            with pytest.raises(pika.exceptions.ProbableAuthenticationError):
                pika.BlockingConnection(params)
        pika.BlockingConnection(pika.URLParameters(cluster.user.url(url))).close()
        plan = cluster.plans[1]
        assert private(plan.config_path) and cluster.user.password in plan.config_path.read_text()
        cookie = cluster.home / ".erlang.cookie"
        assert stat.S_IMODE(cookie.stat().st_mode) == 0o400 and private(cookie)
        assert stat.S_IMODE(plan.crash_dir.stat().st_mode) == 0o700  # a crash dump holds the cookie and password
        recorded = cluster.context()["nodes"][0]["config"]
        assert cluster.user.password not in recorded and "default_pass = <redacted>" in recorded


def test_nats_streaming_asks_for_the_cells_user(tmp_path: Path) -> None:
    started = start_server(STAN_RELEASE, StanBroker(), tmp_path, "passwords")
    try:
        login: dict[str, Any] = {k: started.client[k] for k in ("user", "password")}
        assert len(login["password"]) >= 24

        async def connect(**credentials: Any) -> None:
            nc = await nats.connect(started.address, allow_reconnect=False, max_reconnect_attempts=0, **credentials)
            await nc.close()

        with pytest.raises((NoServersError, nats.errors.Error)):
            asyncio.run(connect())
        asyncio.run(connect(**login))
        assert private(tmp_path / STAN_CONFIG) and login["password"] in (tmp_path / STAN_CONFIG).read_text()
        assert login["password"] not in started.context["config"] and "<redacted>" in started.context["config"]
    finally:
        started.nodes.stop()
