"""A nats-server release that has no PyPI wheel, built from the Go module proxy with the machine's Go, then started
with a cell's own authorization and carrying a core round trip. The build is paid once: it is cached per version
(`<cache>/nats-server/<version>/`), so only a clean cache builds it again (about 10-40 s here, with the machine's Go
module and build caches warm)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.msg import Msg

from bench_tasks.systems.nats import NATS, release
from bench_tasks.systems.nats.server import NatsServer
from bench_tasks.systems.nats.settings import NatsBroker

pytestmark = [
    pytest.mark.alongside,
    pytest.mark.usefixtures("no_orphans"),
    pytest.mark.skipif(shutil.which("go") is None, reason="Go is installed by `make venv` (tools)"),
]
# The oldest 2.x release the module proxy lists, and a small build: no wheel was ever published for it.
SOURCE_RELEASE = "2.1.2"
AUTHORIZATION = {"user": "bench", "password": "built-from-source"}


@pytest.fixture(scope="module")
def built() -> Path:
    """The release's binary, built on first use (the release list says it comes from the module proxy)."""
    listed = NATS.release_list().get(SOURCE_RELEASE) or NATS.release_list(refresh=True).get(SOURCE_RELEASE)
    assert listed is not None and listed.source == release.BUILD_SOURCE, listed
    return release.server_binary(SOURCE_RELEASE)


def test_a_release_without_a_wheel_is_built_from_the_module_proxy(built: Path) -> None:
    assert built == release.release_dir(SOURCE_RELEASE) / "nats-server"
    provenance = json.loads((built.parent / "build.json").read_text())
    assert provenance["module"] == f"{release.MODULE}@v{SOURCE_RELEASE}" and provenance["go"].startswith("go")
    assert release.server_binary(SOURCE_RELEASE) == built  # cached: verified, not built again


def test_the_built_server_starts_asks_for_its_user_and_carries_messages(built: Path, tmp_path: Path) -> None:
    broker = NatsBroker(server={"authorization": AUTHORIZATION})

    async def round_trip(url: str) -> list[bytes]:
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(url, allow_reconnect=False, connect_timeout=2)  # no user: refused
        nc = await nats.connect(url, user=AUTHORIZATION["user"], password=AUTHORIZATION["password"])
        got: list[bytes] = []

        async def on_message(msg: Msg) -> None:
            got.append(msg.data)

        sub = await nc.subscribe("built", cb=on_message)
        for i in range(100):
            await nc.publish("built", b"m%d" % i)
        await nc.flush()
        while len(got) < 100:
            await asyncio.sleep(0.01)
        await sub.unsubscribe()
        await nc.close()
        return got

    with NatsServer(SOURCE_RELEASE, broker, tmp_path) as server:
        assert server.endpoint is not None and server.endpoint.version == SOURCE_RELEASE
        assert NatsServer.varz(server.endpoint.monitor_url)["go"].startswith("go1.")  # the machine's Go built it
        got = asyncio.run(asyncio.wait_for(round_trip(server.endpoint.url), 30))
    assert got == [b"m%d" % i for i in range(100)]
