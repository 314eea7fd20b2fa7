"""`sixnines brokers …`: start, stop, inspect and fetch brokers outside any cell (for trying things by hand).

One state file per system (the same JSON every broker handle writes, `brokers.handles`), so `down` and `status`
find what `up` started; the options map to the system's broker settings and are validated by its model.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer
from pydantic import ValidationError

from ..errors import BrokerError
from ..releases.order import stable
from ..systems import SYSTEMS
from .app import brokers_app, out

T = TypeVar("T")
SystemArgument = Annotated[str, typer.Argument(metavar="SYSTEM", help=f"the broker system: {', '.join(SYSTEMS)}")]
_SETTING = "{name} has no broker setting {key!r}"
# Each option sets the broker setting of its name (`--sync-interval` -> broker.sync_interval); the system's model
# says which it has and what it allows (docs/matrix.md).
SettingOption = Annotated[Optional[T], typer.Option(help="the broker setting of this name (see docs/matrix.md)")]  # noqa: UP045


@brokers_app.command("up")
def brokers_up(
    system_name: SystemArgument,
    version: Annotated[str, typer.Option(help="release or 'latest'")] = "latest",
    mode: SettingOption[str] = None,
    storage: SettingOption[str] = None,
    sync_interval: SettingOption[str] = None,
    brokers: SettingOption[int] = None,
    servers: SettingOption[int] = None,
) -> None:
    """Start brokers in the background on 127.0.0.1 and print how to reach them."""
    from ..brokers import state
    from ..brokers.handles import NodeBrokers
    from ..brokers.process import stopped_on_failure
    from ..brokers.provision import attach
    from ..paths import cache_dir
    from ..systems import system

    chosen = system(system_name)
    current = state.load(chosen.name)
    if current is not None and attach(current).running():
        raise BrokerError(
            f"{chosen.name} is already up (pids {attach(current).running()}); run 'sixnines brokers down'"
        )
    settings = {
        "mode": mode,
        "storage": storage,
        "sync_interval": sync_interval,
        "brokers": brokers,
        "servers": servers,
    }
    spec = _spec(chosen, version, {k: v for k, v in settings.items() if v is not None})
    workdir = cache_dir() / "brokers" / chosen.name
    started = chosen.start_brokers(spec, "brokers", workdir, False, "127.0.0.1")
    with stopped_on_failure(started.nodes.stop, f"the {chosen.name} brokers"):  # never detached unrecorded
        handle = NodeBrokers(chosen, started)
        state.save(chosen.name, handle.state())
    out.print(f"{chosen.name} {spec.version} up: {handle.address}  nodes {handle.pids()}", soft_wrap=True)
    for line in [*chosen.describe_running(handle.state()), *_login(handle.state())]:
        out.print(f"  {line}", soft_wrap=True)


def _login(current: dict[str, Any]) -> list[str]:
    """Where a user finds what to log in with: the brokers ask for a password, which is never printed."""
    if not current.get("client_secrets"):
        return []
    user = current["client"].get("user") or current["client"].get("username")
    who = f"user {user}, " if user else ""
    return [f"log in with {who}the password in {current['client_secrets']} (readable by you only)"]


def _spec(chosen: Any, version: str, broker: dict[str, Any]) -> Any:
    """A cell spec holding these broker settings, validated by the system's own model (errors name the field)."""
    raw = {
        "system": chosen.name,
        "version": chosen.resolve_version(version),
        "measurement": "e2e",  # one-way fits every broker setting
        "workload": {"message_size_bytes": 64, "rate_per_s": 1, "measure_s": 1},
        "broker": broker,
    }
    try:
        return chosen.cell_model.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(_problem(chosen.name, e) for e in exc.errors())
        raise BrokerError(f"{chosen.name} broker settings: {problems}") from None


def _problem(name: str, error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"])
    if error["type"] == "extra_forbidden":
        return _SETTING.format(name=name, key=where.removeprefix("broker."))
    return f"{where or 'broker'}: {error['msg'].removeprefix('Value error, ')}"


@brokers_app.command("down")
def brokers_down(system_name: SystemArgument) -> None:
    """Stop brokers started with `brokers up` (SIGTERM, then SIGKILL after a timeout)."""
    from ..brokers import state
    from ..brokers.provision import attach
    from ..systems import system

    name = system(system_name).name
    current = state.load(name)
    if current is None:
        out.print(f"{name}: nothing to stop")
        return
    stopped = attach(current).stop()
    shutil.rmtree(current["workdir"], ignore_errors=True)
    state.forget(name)
    out.print(f"{name}: stopped pids {stopped}" if stopped else f"{name}: was not running")


@brokers_app.command("status")
def brokers_status(system_name: SystemArgument) -> None:
    """Show whether brokers started with `brokers up` are running (exit 3 when down)."""
    from ..brokers import state
    from ..brokers.provision import attach
    from ..systems import system

    chosen = system(system_name)
    current = state.load(chosen.name)
    running = attach(current).running() if current else []
    if not running:
        out.print(f"{chosen.name}: down")
        raise typer.Exit(3)
    version = current["context"].get("version") or "?"
    alive = f"nodes alive {len(running)}/{len(current['nodes'])}"
    out.print(f"{chosen.name}: up  {current['address']}  version {version}  {alive}", soft_wrap=True)
    for line in [*chosen.describe_running(current), *_login(current)]:
        out.print(f"  {line}", soft_wrap=True)


@brokers_app.command("certs")
def brokers_certs(
    folder: Annotated[Path, typer.Argument(help="where ca.pem, server-cert.pem, server-key.pem, server.pem go")],
    host: Annotated[list[str], typer.Option("--host", help="a name (or IP) the server certificate covers")],
    days: Annotated[int, typer.Option(help="validity of a new CA and certificate, in days")] = 365,
    readable_keys: Annotated[
        bool, typer.Option("--readable-keys", help="private keys readable by every user (brokers of another uid)")
    ] = False,
    ca_out: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--ca-out", help="also copy ca.pem alone into this folder: what clients mount, without keys"),
    ] = None,
) -> None:
    """Make a CA and a server certificate for brokers in FOLDER, or keep the ones a previous run made there.

    What the docker-compose deployment's `broker-certs` service runs at every start: Kafka (PEM keystore) and
    nats-server read the files from the shared volume, clients trust ca.pem. Existing material that misses a
    host or expires within a week is an error naming the fix, never silently replaced under running brokers."""
    import datetime as dt

    from ..brokers.tls import TlsError, ensure_tls, tls_files

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
    if ca_out is not None:  # the certificate clients trust, in a folder that holds no private key
        ca_out.mkdir(parents=True, exist_ok=True)
        (ca_out / "ca.pem").write_bytes(tls_files(folder).ca_cert.read_bytes())
        out.print(f"copied the CA certificate to {ca_out / 'ca.pem'}")


@brokers_app.command("fetch")
def brokers_fetch(
    system_name: SystemArgument,
    version: Annotated[Optional[str], typer.Argument(help="release to fetch into the cache")] = None,  # noqa: UP045
    list_versions: Annotated[bool, typer.Option("--list", help="list the releases available")] = False,
) -> None:
    """Fetch a broker release into the cache (verified before use), or list the releases."""
    from ..systems import system

    chosen = system(system_name)
    if list_versions or version is None:
        listed = chosen.release_list(refresh=True)  # the registry, asked now; the cache matrices validate against
        for release in listed.releases:
            out.print(f"{release.version}  {release.source}{_release_note(release)}", soft_wrap=True)
        return
    version = chosen.resolve_version(version)
    problem = chosen.release_list().problem(version)
    if problem is not None:
        raise BrokerError(problem)
    out.print(str(chosen.fetch_release(version)), soft_wrap=True)


def _release_note(release: Any) -> str:
    """What `--list` says beside a release that `latest` would not choose."""
    if release.missing is not None:
        return f"  (cannot be assembled: {release.missing})"
    return "" if stable(release.version) else "  (pre-release)"
