"""The brokers' TLS material (bench_tasks.brokers.tls) as the compose deployment's broker-certs service makes it:
names every broker, lasts as asked, is kept across starts, refused (naming why) once it no longer fits, and
passes a real TLS handshake that verifies the broker's name against the CA."""

from __future__ import annotations

import datetime as dt
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography import x509

from bench_tasks.brokers.tls import TlsError, ensure_tls, make_tls, tls_files, tls_problem

HOSTS = ("kafka1", "kafka2", "nats1", "localhost")


def _handshake(folder: Path, server_name: str) -> str:
    """Serve one TLS connection on loopback with the server material; connect as a client trusting only the CA
    and checking `server_name`. Returns the negotiated protocol version (raises on a failed verification)."""
    files = tls_files(folder)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(files.server_cert, files.server_key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        client_ctx = ssl.create_default_context(cafile=files.ca_cert)
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        with raw, client_ctx.wrap_socket(raw, server_hostname=server_name) as tls:
            version = tls.version() or ""
            tls.sendall(b"x")
        return version
    finally:
        thread.join(timeout=5)
        listener.close()


def test_made_once_then_kept(tmp_path: Path) -> None:
    assert ensure_tls(tmp_path, HOSTS, dt.timedelta(days=365), key_mode=0o644) is True
    files = tls_files(tmp_path)
    first = files.ca_cert.read_bytes()
    cert = x509.load_pem_x509_certificate(files.server_cert.read_bytes())
    left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=364) < left <= dt.timedelta(days=365)
    assert stat.S_IMODE(files.server_key.stat().st_mode) == 0o644  # brokers of another uid read it
    assert tls_problem(tmp_path, HOSTS) is None
    assert ensure_tls(tmp_path, HOSTS, dt.timedelta(days=365)) is False  # a restart keeps what clients trust
    assert files.ca_cert.read_bytes() == first
    assert _handshake(tmp_path, "kafka2").startswith("TLS")
    with pytest.raises(ssl.SSLCertVerificationError, match="kafka3"):
        _handshake(tmp_path, "kafka3")


def test_keys_stay_private_by_default(tmp_path: Path) -> None:
    files = make_tls(tmp_path)
    assert stat.S_IMODE(files.server_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.server_pem.stat().st_mode) == 0o600


def test_material_that_no_longer_fits_is_refused_naming_why(tmp_path: Path) -> None:
    make_tls(tmp_path, ("kafka1",), dt.timedelta(days=365))
    with pytest.raises(TlsError, match=r"does not name nats1 \(it names kafka1\)"):
        ensure_tls(tmp_path, ("kafka1", "nats1"), dt.timedelta(days=365))
    make_tls(tmp_path / "short", ("kafka1",), dt.timedelta(days=3))
    assert "server-cert.pem expires" in str(tls_problem(tmp_path / "short", ("kafka1",)))
    other = make_tls(tmp_path / "other", ("kafka1",), dt.timedelta(days=365))
    (tmp_path / "ca.pem").write_bytes(other.ca_cert.read_bytes())  # a CA that did not sign the certificate
    assert tls_problem(tmp_path, ("kafka1",)) == "server-cert.pem is not signed by ca.pem"
    tls_files(tmp_path).server_pem.unlink()
    assert tls_problem(tmp_path, ("kafka1",)) == "missing server.pem"


def test_the_cli_the_compose_service_runs(tmp_path: Path) -> None:
    """`python -m bench_tasks brokers certs` as docker-compose.yaml's broker-certs service calls it."""
    args = [sys.executable, "-m", "bench_tasks", "brokers", "certs", str(tmp_path / "certs"), "--readable-keys"]
    args += ["--days", "30", "--host", "kafka1", "--host", "nats1"]
    env = {**os.environ, "COLUMNS": "200"}
    made = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    assert made.returncode == 0, made.stderr
    assert "made TLS material" in made.stdout and _handshake(tmp_path / "certs", "nats1")
    kept = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
    assert kept.returncode == 0 and "kept TLS material" in kept.stdout
    refused = subprocess.run([*args, "--host", "kafka9"], capture_output=True, text=True, timeout=60, env=env)
    assert refused.returncode == 1
    assert "does not name kafka9" in refused.stderr and "broker-certs volume" in refused.stderr
