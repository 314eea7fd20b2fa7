"""The connection type of an external broker that a matrix names (`connection:`), for Airflow's connection form.

A cell reads any connection type its system understands (see each system's page); `sixnines_broker` is the one
this package registers, with the form's fields labelled for brokers. What a system
reads of it (host, port, login, password, extras such as a CA file) is its own `access.py`.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

import bench_tasks as sixnines  # its names load when a hook is used, not when the provider is listed


class BrokerHook(BaseHook):
    """A connection to a broker sixnines does not start: host, port, login and password, TLS in the extras."""

    conn_name_attr = "conn_id"
    default_conn_name = "sixnines_broker"
    conn_type = "sixnines_broker"
    hook_name = "sixnines broker"

    def __init__(self, conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.conn_id = conn_id

    def get_conn(self) -> sixnines.BrokerConnection:
        """The connection as the harness reads it (the password never in a repr)."""
        return sixnines.get_connection(self.conn_id)

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": [],
            "relabeling": {"host": "Broker host(s)", "schema": "Virtual host / database / stream prefix"},
            "placeholders": {
                "host": "broker1.example.com, or host1:port1,host2:port2 for several",
                "extra": '{"ca": "/path/to/ca.pem"}',
            },
        }
