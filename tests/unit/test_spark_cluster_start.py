"""The standalone cluster's start wait reads the master's /json/ status while its UI is still attaching pages.
For that moment the UI's "/" page answers "/json/" with HTML (a CI run failed on it): the wait must take that
for "not ready yet", while `state()` outside the start keeps failing loudly on anything but JSON."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.spark_cluster import StandaloneCluster

MASTER_PAGE = b'<!DOCTYPE html><html data-bs-theme="light"><body>Spark Master</body></html>'
ALIVE = json.dumps({"status": "ALIVE", "workers": []}).encode()


@pytest.fixture
def ui() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback HTTP server answering each GET with the next body of its list (the last one repeats)."""
    bodies: list[bytes] = []

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = bodies.pop(0) if len(bodies) > 1 else bodies[0]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_the_html_page_at_json_while_starting_reads_as_not_ready(ui: tuple[str, list[bytes]], tmp_path: Path) -> None:
    url, bodies = ui
    bodies.extend([MASTER_PAGE, ALIVE])
    cluster = StandaloneCluster("spark://127.0.0.1:1", url, tmp_path)

    assert cluster.state_while_starting() == {}
    assert cluster.state_while_starting()["status"] == "ALIVE"


def test_state_outside_the_start_still_fails_on_html(ui: tuple[str, list[bytes]], tmp_path: Path) -> None:
    url, bodies = ui
    bodies.append(MASTER_PAGE)
    cluster = StandaloneCluster("spark://127.0.0.1:1", url, tmp_path)

    with pytest.raises(json.JSONDecodeError):
        cluster.state()
