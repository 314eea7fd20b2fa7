"""Alert delivery (plugins/sixnines_airflow/notifier.py) over real sockets: SMTP's STARTTLS verifies the server's
certificate, and a channel that cannot be reached is recorded and fails the run's verdict, never swallowed."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import airflow.settings  # noqa: F401  Airflow's settings put the plugins folder (sixnines_airflow) on sys.path
import pytest

from bench_tasks.brokers.tls import make_tls
from bench_tasks.cell.verdict import run_verdict


class SmtpWithStartTls(socketserver.StreamRequestHandler):
    """Just enough SMTP for smtplib: EHLO offering STARTTLS and AUTH, the TLS upgrade, a login, one message."""

    server: Any

    def reply(self, line: str) -> None:
        self.wfile.write(f"{line}\r\n".encode())
        self.wfile.flush()

    def handle(self) -> None:
        self.reply("220 test ESMTP")
        while line := self.rfile.readline().decode(errors="replace").strip():
            verb = line.split()[0].upper()
            if verb == "EHLO":
                self.reply("250-test\r\n250-STARTTLS\r\n250 AUTH PLAIN LOGIN")
            elif verb == "STARTTLS":
                self.reply("220 go ahead")
                self._upgrade()
            elif verb == "DATA":
                self.reply("354 end with .")
                body = b"".join(iter(self.rfile.readline, b".\r\n"))
                self.server.messages.append(body.decode(errors="replace"))
                self.reply("250 queued")
            elif verb == "QUIT":
                self.reply("221 bye")
                return
            else:  # AUTH, MAIL, RCPT
                self.reply("235 ok" if verb == "AUTH" else "250 ok")

    def _upgrade(self) -> None:
        try:
            self.connection = self.server.tls.wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            raise ConnectionAbortedError("the client refused the handshake") from None
        self.rfile = self.connection.makefile("rb")
        self.wfile = self.connection.makefile("wb")


@pytest.fixture
def smtp_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A local SMTP server whose STARTTLS presents a certificate of a CA nobody trusts; yields (port, CA file)."""
    files = make_tls(tmp_path / "tls", ("127.0.0.1", "localhost"))
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), SmtpWithStartTls)
    server.daemon_threads = True
    server.messages = []  # type: ignore[attr-defined]
    server.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # type: ignore[attr-defined]
    server.tls.load_cert_chain(files.server_pem)  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], files.ca_cert
    finally:
        server.shutdown()
        server.server_close()


def smtp_conn(port: int, **extra: str) -> str:
    return json.dumps(
        {
            "conn_type": "smtp",
            "host": "127.0.0.1",
            "port": port,
            "login": "bench",
            "password": "pw-12345",
            "extra": {"to": "oncall@example.com", **extra},
        }
    )


def test_starttls_verifies_the_mail_servers_certificate(
    smtp_server: tuple[int, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sixnines_airflow.notifier import deliver

    port, ca = smtp_server
    monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_NOTIFY", smtp_conn(port))
    failed = deliver("sixnines_notify", "subject", {"event": "cell_failed"})
    assert failed is not None and "CERTIFICATE_VERIFY_FAILED" in failed, failed
    monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_NOTIFY", smtp_conn(port, ssl_ca_file=str(ca)))
    assert deliver("sixnines_notify", "subject", {"event": "cell_failed"}) is None  # a CA it trusts: delivered


def test_a_broken_smtp_connection_fails_the_runs_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cells all landed ok, but the alert channel refused the connection: the run is failed, with the reason."""
    from sixnines_airflow.notifier import publish

    with socket.socket() as closed:  # a port nothing listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_NOTIFY", smtp_conn(port))
    lake, base = tmp_path / "lake", tmp_path / "cache" / "airflow" / "run1"
    (base / "c01").mkdir(parents=True)
    (base / "c01" / "landed.json").write_text(json.dumps({"status": "ok", "reason": None}))
    folder = lake / "notifications" / "run_date=2026-01-15" / "run_id=run1"
    record = {"event": "regression", "run_id": "run1", "summary": "p99.9 up 40 %"}
    with contextlib.suppress(Exception):
        publish(folder / "regression-000.json", record, "sixnines_notify", "sixnines regression")
    written = json.loads((folder / "regression-000.json").read_text())
    assert written["summary"] == "p99.9 up 40 %" and "ConnectionRefusedError" in written["delivery"]["failed"]

    outcome, problems = run_verdict(base, ["c01"], lake, "2026-01-15", "run1")
    assert outcome == {"c01": "ok"}
    (problem,) = problems
    assert "regression-000.json" in problem and "sixnines_notify" in problem and "ConnectionRefusedError" in problem
