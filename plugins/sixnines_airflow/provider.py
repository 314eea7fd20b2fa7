"""The provider metadata Airflow reads through the `apache_airflow_provider` entry point: what the sixnines package
adds to an Airflow deployment (its connection type, notifiers and plugin), listed by `airflow providers list`."""

from __future__ import annotations

from importlib import metadata
from typing import Any

PACKAGE = "sixnines"


def get_provider_info() -> dict[str, Any]:
    """Airflow's provider-info dict (`airflow/provider_info.schema.json`); cheap, as every Airflow process asks."""
    return {
        "package-name": PACKAGE,
        "name": "sixnines",
        "description": "Coordinated-omission-free latency benchmarks of message brokers, scheduled by Airflow.",
        "versions": [metadata.version(PACKAGE)],
        "connection-types": [
            {
                "connection-type": "sixnines_broker",
                "hook-class-name": "sixnines_airflow.hooks.BrokerHook",
                "hook-name": "sixnines broker",
            }
        ],
        "notifications": [
            f"sixnines_airflow.notifier.{name}"
            for name in ("CellFailureNotifier", "AnalysisFailureNotifier", "RegressionAlertNotifier")
        ],
    }
