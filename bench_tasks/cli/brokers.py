"""`sixnines brokers …`: start, stop, inspect and fetch brokers outside any cell (for trying things by hand)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import BrokerError
from .app import brokers_app, out

SYSTEMS = ("nats", "kafka")


@brokers_app.command("up")
def brokers_up(
    system: Annotated[str, typer.Argument(help="nats or kafka")],
    version: Annotated[str, typer.Option(help="release or 'latest'")] = "latest",
    mode: Annotated[str, typer.Option(help="nats: core or jetstream")] = "core",
    storage: Annotated[str, typer.Option(help="nats JetStream storage: memory or file")] = "memory",
    sync_interval: Annotated[str, typer.Option(help="nats JetStream fsync: default, always or a duration")] = "default",
    brokers: Annotated[int, typer.Option(help="kafka: 1 or 3 KRaft nodes")] = 1,
    servers: Annotated[int, typer.Option(help="nats: 1 server, or a 3-node cluster (JetStream only)")] = 1,
) -> None:
    """Start brokers in the background on 127.0.0.1 and print how to reach them."""
    from ..brokers import state
    from ..paths import cache_dir
    from ..systems import resolve_version

    _known_system(system)
    if (current := state.load(system)) is not None and any(_alive(pid) for pid in _state_pids(current)):
        raise BrokerError(f"{system} is already up (pids {_state_pids(current)}); run 'sixnines brokers down {system}'")
    version = resolve_version(system, version)
    workdir = cache_dir() / "brokers" / system
    if system == "kafka":
        from ..systems.kafka.cluster import KafkaCluster

        if brokers not in (1, 3):
            raise BrokerError(f"--brokers {brokers}: a cluster has 1 or 3 nodes")
        cluster = KafkaCluster(version, brokers, {}, workdir, tie_to_parent=False)
        endpoint = cluster.start()
        state.save(system, cluster.state())
        out.print(
            f"kafka {endpoint.version} up: {endpoint.bootstrap_servers}  nodes {endpoint.pids}  "
            f"(ready in {endpoint.ready_after_s:.1f} s)"
        )
        return
    from pydantic import ValidationError

    from ..systems.nats.server import NatsServer
    from ..systems.nats.settings import NatsBroker

    try:
        settings = {"mode": mode, "storage": storage, "sync_interval": sync_interval, "servers": servers}
        broker = NatsBroker.model_validate(settings)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'broker'}: {e['msg']}" for e in exc.errors())
        raise BrokerError(f"nats broker settings: {problems}") from None
    if broker.servers > 1:
        from ..systems.nats.cluster import NatsCluster

        cluster = NatsCluster(version, broker, workdir, tie_to_parent=False)
        cluster_endpoint = cluster.start()
        state.save(system, cluster.state())
        out.print(
            f"nats {cluster_endpoint.version} ({mode}) cluster {cluster_endpoint.cluster_name} up: "
            f"nodes {cluster_endpoint.pids}  (ready in {cluster_endpoint.ready_after_s:.1f} s)"
        )
        out.print(f"  url {cluster_endpoint.url}")  # its own line: three URLs would wrap the summary
        return
    server = NatsServer(version, broker, workdir, tie_to_parent=False)
    nats_endpoint = server.start()
    state.save(system, server.state())
    out.print(
        f"nats {nats_endpoint.version} ({mode}) up: {nats_endpoint.url}  monitor {nats_endpoint.monitor_url}  "
        f"pid {nats_endpoint.pid}"
    )


@brokers_app.command("down")
def brokers_down(system: Annotated[str, typer.Argument(help="nats or kafka")]) -> None:
    """Stop brokers started with `brokers up` (SIGTERM, then SIGKILL after a timeout)."""
    from ..brokers import state
    from ..brokers.process import stop_pid

    _known_system(system)
    current = state.load(system)
    if current is None:
        out.print(f"{system}: nothing to stop")
        return
    if system == "kafka":
        from ..systems.kafka.cluster import stop_detached

        stopped = stop_detached(current)
    elif "nodes" in current:  # a NATS cluster
        from ..systems.nats.cluster import stop_detached as stop_nats_cluster

        stopped = stop_nats_cluster(current)
    else:
        stopped = [current["pid"]] if stop_pid(current["pid"], "nats-server") else []
    shutil.rmtree(current["workdir"], ignore_errors=True)
    state.forget(system)
    out.print(f"{system}: stopped pids {stopped}" if stopped else f"{system}: was not running")


@brokers_app.command("status")
def brokers_status(system: Annotated[str, typer.Argument(help="nats or kafka")] = "nats") -> None:
    """Show whether brokers started with `brokers up` are running (exit 3 when down)."""
    from ..brokers import state

    _known_system(system)
    current = state.load(system)
    pids = _state_pids(current) if current else []
    alive = [pid for pid in pids if _alive(pid)]
    if not alive:
        out.print(f"{system}: down")
        raise typer.Exit(3)
    if system == "kafka":
        out.print(
            f"kafka: up  {current['bootstrap_servers']}  version {current['version']}  "
            f"nodes alive {len(alive)}/{len(pids)}"
        )
        return
    from ..systems.nats.server import NatsServer

    if "nodes" in current:  # a NATS cluster: what each live node says about the JetStream meta group
        live = [n for n in current["nodes"] if n["pid"] in alive]
        meta = NatsServer.jsz(live[0]["monitor_url"]).get("meta_cluster") or {}
        out.print(
            f"nats: up  cluster {current['cluster_name']}  version {current['version']}  "
            f"nodes alive {len(alive)}/{len(pids)}  meta leader {meta.get('leader') or 'none'}"
        )
        out.print(f"  url {current['url']}")
        return
    varz = NatsServer.varz(current["monitor_url"])
    out.print(
        f"nats: up  {current['url']}  pid {current['pid']}  version {varz.get('version')}  "
        f"connections {varz.get('connections')}  in_msgs {varz.get('in_msgs')}"
    )


@brokers_app.command("certs")
def brokers_certs(
    folder: Annotated[Path, typer.Argument(help="where ca.pem, server-cert.pem, server-key.pem, server.pem go")],
    host: Annotated[list[str], typer.Option("--host", help="a name (or IP) the server certificate covers")],
    days: Annotated[int, typer.Option(help="validity of a new CA and certificate, in days")] = 365,
    readable_keys: Annotated[
        bool, typer.Option("--readable-keys", help="private keys readable by every user (brokers of another uid)")
    ] = False,
) -> None:
    """Make a CA and a server certificate for brokers in FOLDER, or keep the ones a previous run made there.

    What the docker-compose deployment's `broker-certs` service runs at every start: Kafka (PEM keystore) and
    nats-server read the files from the shared volume, clients trust ca.pem. Existing material that misses a
    host or expires within a week is an error naming the fix, never silently replaced under running brokers."""
    import datetime as dt

    from ..brokers.tls import TlsError, ensure_tls

    if days < 8:
        raise typer.BadParameter(f"--days {days}: at least 8 (material is renewed a week before it expires)")
    try:
        made = ensure_tls(folder, tuple(host), dt.timedelta(days=days), 0o644 if readable_keys else 0o600)
    except TlsError as exc:
        raise TlsError(
            f"{exc}. Stop the brokers, remove the folder's files (docker compose: the broker-certs volume) and "
            "start again; clients and brokers then share the new CA"
        ) from None
    out.print(f"{'made' if made else 'kept'} TLS material in {folder} for {', '.join(host)}")


@brokers_app.command("fetch")
def brokers_fetch(
    system: Annotated[str, typer.Argument(help="nats or kafka")],
    version: Annotated[Optional[str], typer.Argument(help="release to fetch into the cache")] = None,  # noqa: UP045
    list_versions: Annotated[bool, typer.Option("--list", help="list the releases available")] = False,
) -> None:
    """Fetch a broker release into the cache (verified before use), or list the releases."""
    from .. import systems as registry

    _known_system(system)
    if list_versions or version is None:
        if system == "kafka":
            from ..systems.kafka.release import available_versions

            supported = set(registry.system("kafka").versions)
            for v in available_versions():
                out.print(f"{v}{'  (supported)' if v in supported else ''}")
        else:
            for v in registry.system(system).versions:
                out.print(v)
        return
    version = registry.resolve_version(system, version)
    if system == "kafka":
        from ..systems.kafka.release import kafka_classpath

        out.print(str(kafka_classpath(version)))
        return
    if version not in registry.system(system).versions:
        raise BrokerError(f"unknown {system} version {version!r}; see 'sixnines brokers fetch {system} --list'")
    from ..systems.nats.release import server_binary

    out.print(str(server_binary(version)))


def _known_system(system: str) -> None:
    if system not in SYSTEMS:
        raise BrokerError(f"unknown system {system!r}; this harness provisions: {', '.join(SYSTEMS)}")


def _state_pids(current: dict) -> list[int]:
    """PIDs recorded by `brokers up`: one nats-server, or every node of a Kafka or NATS cluster."""
    return [int(n["pid"]) for n in current["nodes"]] if "nodes" in current else [int(current["pid"])]


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
