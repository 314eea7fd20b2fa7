"""A failed cell is reported, always: a structured log line and a JSON record under the lake.

When an Airflow connection `sixnines_notify` exists it is also sent there: an `http`/`https` connection is a
webhook (Slack incoming webhooks included) receiving `{"text": ..., "record": ...}`; an `smtp`/`email`
connection sends a mail to the `to` of its extras. No connection, no attempt — and a delivery that fails
is logged, never allowed to hide the record.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import smtplib
import urllib.request
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from airflow.sdk import BaseNotifier

import bench_tasks as sixnines  # its names load when a notifier runs, not when the DAG is parsed

from .runtime import lake_root, run_info, work_for

log = logging.getLogger("sixnines")
RECORD_SCHEMA_VERSION = 1  # 1: first version


class CellFailureNotifier(BaseNotifier):
    """`on_failure_callback` of a cell's `land` task (which fails exactly when the cell failed)."""

    template_fields = ()

    def __init__(self, conn_id: str = "sixnines_notify"):
        super().__init__()
        self.conn_id = conn_id

    def notify(self, context: Any) -> None:
        record = failure_record(context)
        log.error("sixnines.cell_failed %s", json.dumps(record, sort_keys=True, default=str))
        path = record_path(lake_root(), record)
        path.parent.mkdir(parents=True, exist_ok=True)
        sixnines.write_json(path, record)
        text = f"sixnines: cell {record.get('cell_id')} failed in {record['dag_id']} ({record['run_id']}): " + str(
            record.get("reason")
        )
        deliver(self.conn_id, text, record)


class AnalysisFailureNotifier(BaseNotifier):
    """`on_failure_callback` of a sweep's `analysis` task: the gate refused to publish (the Spark job's error
    names the failed expectations; the validation results are in `lake/quarantine/…/validation.json`) or the
    job itself failed."""

    template_fields = ()

    def __init__(self, conn_id: str = "sixnines_notify"):
        super().__init__()
        self.conn_id = conn_id

    def notify(self, context: Any) -> None:
        ti, run = context["ti"], run_info(context)
        part = Path(f"run_date={run.run_date}") / f"run_id={run.run_id}"
        quarantine = sixnines.committed_run_file(
            lake_root(), sixnines.QUARANTINE_AREA, run.run_date, run.run_id, "validation.json"
        )
        record = {
            "schema_version": RECORD_SCHEMA_VERSION,
            "event": "analysis_failed",
            "at": dt.datetime.now(dt.UTC).isoformat(),
            "dag_id": ti.dag_id,
            "task_id": ti.task_id,
            "run_id": run.run_id,
            "run_date": run.run_date,
            "reason": str(context.get("exception")),
            "validation": None if quarantine is None else str(quarantine),
        }
        log.error("sixnines.analysis_failed %s", json.dumps(record, sort_keys=True, default=str))
        sixnines.write_json(lake_root() / "notifications" / part / "analysis.json", record)
        deliver(self.conn_id, f"sixnines: analysis of {run.run_id} failed: {record['reason']}"[:500], record)


class RegressionAlertNotifier(BaseNotifier):
    """`on_success_callback` of a sweep's `regressions` task: every alert the check raised for this run is
    reported the way a failed cell is — a structured log line, a JSON record under the lake, and the optional
    webhook/SMTP connection."""

    template_fields = ()

    def __init__(self, conn_id: str = "sixnines_notify"):
        super().__init__()
        self.conn_id = conn_id

    def notify(self, context: Any) -> None:
        run = run_info(context)
        part = Path(f"run_date={run.run_date}") / f"run_id={run.run_id}"
        found = sixnines.committed_run_file(
            lake_root(), sixnines.REGRESSIONS_AREA, run.run_date, run.run_id, "alerts.json"
        )
        alerts = [] if found is None else json.loads(found.read_text()).get("alerts", [])
        for index, alert in enumerate(alerts):
            record = {
                "schema_version": RECORD_SCHEMA_VERSION,
                "event": "regression",
                "at": dt.datetime.now(dt.UTC).isoformat(),
                "dag_id": context["ti"].dag_id,
                "run_id": run.run_id,
                "run_date": run.run_date,
                **alert,
            }
            log.error("sixnines.regression %s", json.dumps(record, sort_keys=True, default=str))
            sixnines.write_json(lake_root() / "notifications" / part / f"regression-{index:03d}.json", record)
            deliver(self.conn_id, f"sixnines regression in {record['dag_id']}: {alert.get('summary')}", record)


def deliver(conn_id: str, text: str, record: dict[str, Any]) -> None:
    """Send `text` and `record` over the optional connection `conn_id` (http(s) webhook or SMTP); without one,
    the log line and the JSON file already written are the notification."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:  # no such connection: the log line and the file are the notification
        return
    try:
        if conn.conn_type in ("http", "https"):
            url = conn.host if "://" in (conn.host or "") else f"{conn.conn_type}://{conn.host}"
            body = json.dumps({"text": text, "record": record}, default=str).encode()
            req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=10).close()
        elif conn.conn_type in ("smtp", "email"):
            msg = EmailMessage()
            msg["Subject"], msg["From"] = text[:120], conn.login or "sixnines@localhost"
            msg["To"] = conn.extra_dejson["to"]
            msg.set_content(json.dumps(record, indent=2, default=str))
            with smtplib.SMTP(conn.host, conn.port or 25, timeout=10) as smtp:
                if conn.login:
                    smtp.starttls()
                    smtp.login(conn.login, conn.password or "")
                smtp.send_message(msg)
        else:
            log.warning("connection %s has type %s; expected http(s) or smtp", conn_id, conn.conn_type)
    except Exception:
        log.exception("could not deliver %s to %s", record.get("event"), conn_id)


def failure_record(context: Any) -> dict[str, Any]:
    """What failed, where, and why: the task and run, and the cell as far as it got (its landed row's reason)."""
    ti, run = context["ti"], run_info(context)
    work = work_for(context)
    landed = work.read(work.landed) or {}
    state = work.read(work.state) or {}
    cell = state.get("cell") or {}
    failure = work.read(work.root / "failure.json") or {}
    return {
        "schema_version": RECORD_SCHEMA_VERSION,
        "event": "cell_failed",
        "at": dt.datetime.now(dt.UTC).isoformat(),
        "dag_id": ti.dag_id,
        "task_id": ti.task_id,
        "try_number": ti.try_number,
        "run_id": run.run_id,
        "run_date": run.run_date,
        "cell_group": ti.task_id.rsplit(".", 1)[0],
        "cell_id": landed.get("cell_id") or cell.get("id"),
        "label": landed.get("label"),
        "reason": landed.get("reason") or failure.get("reason") or str(context.get("exception")),
        "landed": landed.get("path"),
    }


def record_path(lake: sixnines.LakePath, record: dict[str, Any]) -> sixnines.LakePath:
    return (
        lake
        / "notifications"
        / f"run_date={record['run_date']}"
        / f"run_id={record['run_id']}"
        / f"{record['cell_group']}.json"
    )
