"""nats-streaming-server releases: what a version that is not a release is refused as, how a failed or overlong `go
install` is reported (the machine's real Go, kept off the network), and the version check every use runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench_tasks.errors import BrokerError
from bench_tasks.systems.stan import release

needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="Go is installed by `make venv` (tools)")


def test_what_is_not_a_version_is_refused_before_building(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path))
    with pytest.raises(BrokerError, match=r"'latest' is not a nats-streaming-server release \(like 0\.25\.6\)"):
        release.server_binary("latest")
    assert not (tmp_path / "stan").exists()


@needs_go
def test_a_failed_build_names_the_version_the_command_and_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOPROXY", "off")  # nothing to download from: the module cache below is empty
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "mod"))
    target = tmp_path / "stan" / "0.24.6" / release.BINARY
    target.parent.mkdir(parents=True)
    with pytest.raises(BrokerError) as info:
        release.build("0.24.6", target, timeout_s=120)
    message = str(info.value)
    assert "building nats-streaming-server@v0.24.6 failed" in message
    assert "go install github.com/nats-io/nats-streaming-server@v0.24.6" in message
    assert "GOPROXY=off" in message
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir()] == []  # the temporary GOBIN is gone; a download is not remembered


@needs_go
def test_a_build_past_its_timeout_is_stopped_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOMODCACHE", str(tmp_path / "mod"))
    target = tmp_path / "stan" / "0.24.6" / release.BINARY
    target.parent.mkdir(parents=True)
    with pytest.raises(BrokerError, match=r"took longer than 0 s and was stopped .*release VERSION --timeout SECONDS"):
        release.build("0.24.6", target, timeout_s=0.01)
    assert not target.exists()


def _script(tmp_path: Path, says: str) -> Path:
    """A stand-in executable that prints `says` for --version (only the verifier is tested here)."""
    path = tmp_path / "nats-streaming-server"
    path.write_text(f"#!/bin/sh\necho '{says}'\n")
    path.chmod(0o755)
    return path


def test_the_reported_version_is_parsed_with_the_embedded_nats_server(tmp_path: Path) -> None:
    binary = _script(tmp_path, "nats-streaming-server version 0.25.6, nats-server: v2.9.24")
    assert release.reported_version(binary, "0.25.6") == {"version": "0.25.6", "nats_server": "v2.9.24"}


def test_a_binary_of_another_version_is_refused(tmp_path: Path) -> None:
    binary = _script(tmp_path, "nats-streaming-server version 0.24.0, nats-server: v2.7.2")
    with pytest.raises(BrokerError, match=r"reports 'nats-streaming-server version 0\.24\.0.*expected .* 0\.25\.6"):
        release.reported_version(binary, "0.25.6")


def test_a_binary_that_cannot_run_is_named(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="cannot run"):
        release.reported_version(tmp_path / "missing", "0.25.6")
