"""The server home a cell's RabbitMQ nodes run from: the package's release folder, with only the applications
`rabbitmq_prelaunch` and `rabbit` need (transitively) in its `plugins` folder, as links."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench_tasks.errors import BrokerError
from bench_tasks.systems.rabbitmq import release
from bench_tasks.systems.rabbitmq.home import app_dependencies, boot_closure, write_home

APPS = {
    "rabbitmq_prelaunch-3.10.8": "{applications, [kernel, stdlib, cuttlefish]}",
    "rabbit-3.10.8": "{applications, [kernel, rabbitmq_prelaunch, rabbit_common, ra]},\n{included_applications, []}",
    "rabbit_common-3.10.8": "{applications,\n  [kernel,\n   'jsx']}",
    "ra-2.2.0": "{applications, [kernel, aten]}",
    "aten-0.5.8": "{applications, [kernel]}",
    "cuttlefish-3.0.1": "{applications, [kernel]}",
    "jsx-3.1.0": "{applications, [kernel]}",
    "rabbitmq_management-3.10.8": "{applications, [kernel, rabbit, cowboy]}",
    "cowboy-2.8.0": "{applications, [kernel]}",
}


def fake_release(root: Path) -> Path:
    """A release folder laid out as Debian's rabbitmq-server lays it out (sbin, escript, plugins/<app>-<vsn>)."""
    folder = root / "rabbitmq_server-3.10.8"
    (folder / "sbin").mkdir(parents=True)
    (folder / "sbin" / "rabbitmq-server").write_text("#!/bin/sh\n")
    (folder / "escript").mkdir()
    for name, deps in APPS.items():
        ebin = folder / "plugins" / name / "ebin"
        ebin.mkdir(parents=True)
        app = name.rsplit("-", 1)[0]
        (ebin / f"{app}.app").write_text(f'{{application, {app}, [{{vsn, "1"}}, {deps}]}}.\n')
    (folder / "plugins" / "README").write_text("not an application\n")
    return folder


def test_app_files_name_their_dependencies(tmp_path: Path) -> None:
    folder = fake_release(tmp_path)
    assert app_dependencies(folder / "plugins/rabbit_common-3.10.8/ebin/rabbit_common.app") == {"kernel", "jsx"}


def test_the_home_links_the_release_and_only_the_boot_closure(tmp_path: Path) -> None:
    folder = fake_release(tmp_path)
    home = tmp_path / "cell" / "rabbitmq-home"
    apps = write_home(folder, home)
    assert apps == [
        "aten-0.5.8",
        "cuttlefish-3.0.1",
        "jsx-3.1.0",
        "ra-2.2.0",
        "rabbit-3.10.8",
        "rabbit_common-3.10.8",
        "rabbitmq_prelaunch-3.10.8",
    ]
    assert sorted(p.name for p in (home / "plugins").iterdir()) == apps  # no management, no cowboy
    assert (home / "plugins" / "rabbit-3.10.8").resolve() == (folder / "plugins" / "rabbit-3.10.8").resolve()
    assert (home / "sbin").resolve() == (folder / "sbin").resolve()
    assert (home / "escript").is_symlink()
    assert write_home(folder, home) == apps  # made again from scratch for a new start


def test_a_release_without_rabbit_is_refused(tmp_path: Path) -> None:
    folder = fake_release(tmp_path)
    (folder / "plugins/rabbit-3.10.8/ebin/rabbit.app").unlink()
    with pytest.raises(BrokerError, match="no rabbit application"):
        boot_closure(folder / "plugins")


@pytest.mark.skipif(release.package_version() is None, reason="Debian's rabbitmq-server is not installed")
def test_the_installed_release_boots_the_server_without_optional_plugins() -> None:
    """What the package installs: its boot closure is what a running 3.10.8 node loads (checked on a node by
    tests/integration/test_rabbitmq_nodes.py), none of the optional plugins."""
    plugins = release.LIB_DIR / f"rabbitmq_server-{release.resolve_version('latest')}" / "plugins"
    closure = boot_closure(plugins)
    assert {"rabbit", "rabbit_common", "rabbitmq_prelaunch", "ra", "osiris", "cuttlefish"} <= set(closure)
    assert not any(name.startswith(("rabbitmq_management", "rabbitmq_mqtt", "rabbitmq_stomp")) for name in closure)


def test_removing_a_home_leaves_the_release_whole(tmp_path: Path) -> None:
    """A cell's teardown removes its work folder with the home in it: links are removed, never what they name."""
    folder = fake_release(tmp_path)
    before = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
    home = tmp_path / "cell" / "rabbitmq-home"
    write_home(folder, home)
    shutil.rmtree(tmp_path / "cell")
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == before
