"""A failed cell is reported, always: a structured log line and a JSON record under the lake.

When an Airflow connection `sixnines_notify` exists it is also sent there: an `http`/`https` connection is a
webhook (Slack incoming webhooks included) receiving `{"text": ..., "record": ...}`; an `smtp`/`email`
connection sends a mail to the `to` of its extras, over STARTTLS that verifies the server's certificate (the
system's CAs, or extra `ssl_ca_file`) before it logs in. No connection, no attempt. A delivery that fails is
logged and written into the record (`delivery.failed`), and the run's verdict fails on it: an alert channel
that cannot be reached is an error of the run, never a silent loss of its alerts.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import smtplib
import ssl
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
        text = f"sixnines: cell {record.get('cell_id')} failed in {record['dag_id']} ({record['run_id']}): " + str(
            record.get("reason")
        )
        publish(path, record, self.conn_id, text)


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
        text = f"sixnines: analysis of {run.run_id} failed: {record['reason']}"[:500]
        publish(lake_root() / "notifications" / part / "analysis.json", record, self.conn_id, text)


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
            path = lake_root() / "notifications" / part / f"regression-{index:03d}.json"
            publish(path, record, self.conn_id, f"sixnines regression in {record['dag_id']}: {alert.get('summary')}")


def publish(path: sixnines.LakePath, record: dict[str, Any], conn_id: str, text: str) -> None:
    """Write `record` to the lake, deliver it, and write it again with the failure when delivery failed (the
    run's verdict reads it): the record exists before any delivery is tried, and a failure is never lost. What
    is written and sent holds no secret this process knows (a reason may quote a client's error)."""
    record, text = sixnines.scrubbed(record), sixnines.scrub_text(text)
    sixnines.write_json(path, record)
    failed = deliver(conn_id, text, record)
    if failed is not None:
        sixnines.write_json(path, {**record, "delivery": {"conn_id": conn_id, "failed": failed}})


def deliver(conn_id: str, text: str, record: dict[str, Any]) -> str | None:
    """Send `text` and `record` over the optional connection `conn_id` (http(s) webhook or SMTP). Returns why
    delivery failed, or None: delivered, or no such connection (the log line and the JSON file are then the
    notification)."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:  # no such connection: the log line and the file are the notification
        return None
    try:
        if conn.conn_type in ("http", "https"):
            url = conn.host if "://" in (conn.host or "") else f"{conn.conn_type}://{conn.host}"
            body = json.dumps({"text": text, "record": record}, default=str).encode()
            req = urllib.request.Request(url, body, {"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=10).close()
        elif conn.conn_type in ("smtp", "email"):
            _mail(conn, text, record)
        else:
            return f"connection {conn_id} has type {conn.conn_type!r}; expected http, https or smtp"
    except Exception as exc:
        log.exception("could not deliver %s to %s", record.get("event"), conn_id)
        return f"{type(exc).__name__}: {exc}"
    return None


def _mail(conn: Any, text: str, record: dict[str, Any]) -> None:
    """One mail to the connection's extra `to`; with a login, only after STARTTLS verified the server."""
    msg = EmailMessage()
    msg["Subject"], msg["From"] = text[:120], conn.login or "sixnines@localhost"
    msg["To"] = conn.extra_dejson["to"]
    msg.set_content(json.dumps(record, indent=2, default=str))
    with smtplib.SMTP(conn.host, conn.port or 25, timeout=10) as smtp:
        if conn.login:
            smtp.starttls(context=ssl.create_default_context(cafile=conn.extra_dejson.get("ssl_ca_file")))
            smtp.login(conn.login, conn.password or "")
        smtp.send_message(msg)


def failure_record(context: Any) -> dict[str, Any]:
    """What failed, where, and why: the task and run, and the cell as far as it got (its landed row's reason)."""
    ti, run = context["ti"], run_info(context)
    work = work_for(context)
    landed = work.read(work.landed) or {}
    state = work.read(work.state) or {}
    cell = state.get("cell") or {}
    if cell:
        work.cell()  # the cell's secret settings are known to this process, so the record cannot carry them
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
