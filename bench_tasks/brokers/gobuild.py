"""Servers built from the Go module proxy with the machine's Go, once per version, and the proxy's version lists.

NATS (a nats-server release without a PyPI wheel) and NATS Streaming are Go modules: `go install MODULE@vX` with
GOBIN pointing at a temporary folder beside the cache entry, renamed into place only when the build succeeded, so
a half-built binary is never used; a lock file beside it keeps two processes from building one version at once. A
build runs in its own process group with a deadline, so a timeout also ends the compilers it started. GOFLAGS,
GOPROXY and the Go caches are the machine's own, and `build.json` beside the binary says what built it (the cell's
context records what the server itself reports).

`proxy_versions` reads the module's `@v/list` from the first proxy of GOPROXY: the versions the proxy lists, which
is what a system's release list is made of (a version the proxy serves but does not list cannot be named).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from ..errors import BrokerError

DEFAULT_PROXY = "https://proxy.golang.org"
LIST_TIMEOUT_S = 30.0
FAILURE_FILE = "build-failed.json"


class BuildFailed(BrokerError):
    """`go install` exited with an error. `compiled`: the compiler or linker refused the code (its output has a
    `# package` header), as opposed to a module that could not be downloaded."""

    def __init__(self, message: str, compiled: bool):
        super().__init__(message)
        self.compiled = compiled


def go_binary(purpose: str) -> str:
    """The machine's `go`; BrokerError naming `purpose` and how to install it."""
    go = shutil.which("go")
    if go is None:
        raise BrokerError(f"{purpose} needs Go on PATH (Debian: apt-get install golang-go)")
    return go


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One process at a time in `folder` (a version's cache entry): the lock is released when the file closes,
    even if the process dies."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build(module: str, version: str, target: Path, timeout_s: float, hint: str) -> float:
    """`go install module@v<version>` into `target` with provenance beside it; returns the seconds it took.
    `hint`: the command that builds it ahead with a longer timeout (named when the deadline stops the build)."""
    go = go_binary(f"building {module}@v{version}")
    try:
        seconds = go_install(go, f"{module}@v{version}", target, timeout_s, hint)
    except BuildFailed as exc:
        if exc.compiled:
            _remember_failure(target.parent, go, str(exc))
        raise
    (target.parent / FAILURE_FILE).unlink(missing_ok=True)
    write_provenance(target.parent, f"{module}@v{version}", go, seconds)
    return seconds


def failure(folder: Path) -> str | None:
    """Why a release cannot be built here: the compiler's or linker's refusal the last build in `folder` met, while
    the Go that met it is still the one installed (a download that failed is not remembered: it says nothing of the
    release). None when no such build is known."""
    try:
        known = json.loads((folder / FAILURE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    go = shutil.which("go")
    if go is None or known.get("go") != go_version(go):
        return None
    return f"it does not build with {known['go']} ({known['error']}; remove {folder / FAILURE_FILE} to try again)"


def _remember_failure(folder: Path, go: str, message: str) -> None:
    lines = [line for line in message.splitlines()[1:] if line.strip() and not line.startswith("#")]
    first = lines[0].strip() if lines else message.splitlines()[0]
    facts = {"go": go_version(go), "error": first[:300], "output": message}
    (folder / FAILURE_FILE).write_text(json.dumps(facts, indent=2) + "\n")


def go_install(go: str, package: str, target: Path, timeout_s: float, hint: str = "") -> float:
    """`go install package@version` into a temporary GOBIN beside `target`, then renamed into place (a half-built
    binary is never used); returns the seconds it took."""
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as gobin:
        _go_install(go, package, gobin, timeout_s, hint)
        built = next(Path(gobin).iterdir())
        os.replace(built, target)
    return time.monotonic() - started


def _go_install(go: str, package: str, gobin: str, timeout_s: float, hint: str) -> None:
    """Run `go install` in its own process group, so a timeout ends the compilers it started too."""
    cmd = [go, "install", package]
    what = package.rsplit("/", 1)[-1]
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, "GOBIN": gobin},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        ahead = f"; on a slow host build it ahead: {hint}" if hint else ""
        raise BrokerError(
            f"building {what} took longer than {timeout_s:.0f} s and was stopped "
            f"(GOPROXY={go_env(go, 'GOPROXY')}{ahead})"
        ) from None
    if proc.returncode != 0 or not any(Path(gobin).iterdir()):
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise BuildFailed(
            f"building {what} failed ({' '.join(cmd)}, exit {proc.returncode}, "
            f"GOPROXY={go_env(go, 'GOPROXY')}, GOFLAGS={go_env(go, 'GOFLAGS') or '(none)'}):\n{tail}",
            compiled=any(line.startswith("# ") for line in output.splitlines()),
        )


def go_version(go: str) -> str:
    done = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or "go (version unknown)"


def go_env(go: str, name: str) -> str:
    done = subprocess.run([go, "env", name], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def write_provenance(folder: Path, module: str, go: str, seconds: float) -> None:
    """What built the binary, kept beside it (the cell's context records what the server reports)."""
    facts = {
        "module": module,
        "go": go_version(go),
        "goproxy": go_env(go, "GOPROXY"),
        "goflags": go_env(go, "GOFLAGS"),
        "build_s": round(seconds, 1),
    }
    (folder / "build.json").write_text(json.dumps(facts, indent=2) + "\n")


def proxy_url() -> str:
    """The first proxy of the machine's GOPROXY (`go env GOPROXY`: the environment's, else Go's configuration),
    where `@v/list` is read; Go's default without Go."""
    go = shutil.which("go")
    configured = go_env(go, "GOPROXY") if go is not None else ""
    return first_proxy(configured or DEFAULT_PROXY)


def first_proxy(goproxy: str) -> str:
    """The first entry of a GOPROXY value; `direct` or `off` first means no proxy is asked, and no list read."""
    first = goproxy.replace("|", ",").split(",")[0].strip()
    if first in ("direct", "off", ""):
        raise BrokerError(f"GOPROXY={goproxy}: no module proxy to list versions from (its first entry is {first!r})")
    return first.rstrip("/")


def proxy_versions(module: str, timeout_s: float = LIST_TIMEOUT_S) -> list[str]:
    """Every version the module proxy lists for `module` (`v`-less, in the proxy's order); BrokerError naming the
    URL when it cannot be read."""
    url = f"{proxy_url()}/{_escaped(module)}/@v/list"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            text = answer.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        raise BrokerError(f"cannot read the module proxy's list of {module} ({url}): {exc}") from None
    return [line.strip().removeprefix("v") for line in text.splitlines() if line.strip()]


def _escaped(module: str) -> str:
    """The proxy protocol's case encoding: an upper-case letter is `!` and its lower case."""
    return "".join(f"!{c.lower()}" if c.isupper() else c for c in module)
