"""sixnines' measurement library.

What DAGs, plugins, Spark jobs and benchmarks may import is named here; the rest is private (STYLE 7). Names are
loaded on first use (PEP 562), so `from bench_tasks import load_matrix` at DAG parse time loads the matrix models
and nothing of the generator, the lake or the analysis (numpy, pyarrow, broker clients).
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> (module under bench_tasks, attribute there)
_EXPORTS: dict[str, tuple[str, str]] = {
    **{name: ("spec.matrix", name) for name in ("load_matrix", "parse_matrix")},
    **{name: ("spec.matrix_model", name) for name in ("Cell", "Matrix")},
    "expand_repeats": ("spec.repeats", "expand_repeats"),
    **{name: ("systems", name) for name in ("SYSTEMS", "System", "system", "system_of")},
    **{name: ("errors", name) for name in ("BrokerError", "CellError", "MatrixError", "PayloadError", "SixninesError")},
    "cache_dir": ("paths", "cache_dir"),
    **{name: ("brokers.connections", name) for name in ("BrokerConnection", "get_connection")},
    "HOSTS_TIMEOUT_S": ("topology", "HOSTS_TIMEOUT_S"),
    **{name: ("topology.plan", name) for name in ("generator_queue", "load_hosts", "per_host", "queue_of")},
    **{name: ("topology.plan", name) for name in ("PlacementPlan", "resolve_placement")},
    **{name: ("cell.lifecycle", name) for name in ("land_step", "landed_summary", "prepare_cell", "provision_step")},
    **{name: ("cell.hostlease", name) for name in ("HostBusy", "host_for_analysis", "host_poll_s")},
    **{name: ("cell.teardown", name) for name in ("release_clusters", "teardown_step")},
    "CellWork": ("cell.work", "CellWork"),
    **{name: ("cell.detached", name) for name in ("release_generator", "start_generator", "stop_standbys")},
    "start_standby": ("cell.standby", "start_standby"),
    "HOST_WAIT_S": ("cell.standby", "HOST_WAIT_S"),
    "WAITING_SUFFIX": ("cell.standby", "WAITING_SUFFIX"),
    "base_env": ("cell.hostparts", "base_env"),
    **{name: ("cell.runner", name) for name in ("CellReport", "run_cell", "run_matrix")},
    **{name: ("cell.verdict", name) for name in ("cell_outcomes", "discard_run_work", "run_verdict")},
    "watch_phase": ("cell.watch", "watch_phase"),
    **{name: ("cell.tables", name) for name in ("print_report", "report_from_row")},
    "run_host": ("cell.hostparts", "run_host"),
    "Fault": ("cell.drive", "Fault"),
    **{name: ("capacity.run", name) for name in ("Bounds", "search_capacity", "write_capacity")},
    "max_search_steps": ("capacity.search", "max_search_steps"),
    "CapacitySpec": ("spec.capacity", "CapacitySpec"),
    **{name: ("core.analysis", name) for name in ("Accounting", "CellAnalysis", "analyze")},
    **{
        name: ("core.percentiles", name)
        for name in ("PERCENTILES", "LatencySummary", "is_supported", "required_samples", "summarize")
    },
    **{name: ("core.compare", name) for name in ("COMPARISON_SCHEMA_VERSION", "compare_versions", "format_comparison")},
    **{
        name: ("lake.layout", name)
        for name in (
            "CELLS_SCHEMA",
            "QUARANTINE_AREA",
            "REGRESSIONS_AREA",
            "Lake",
            "RunInfo",
            "committed_run_file",
            "write_json",
        )
    },
    **{name: ("lake.storage", name) for name in ("LakePath", "S3Path", "lake_path", "read_parquet")},
    **{name: ("lake.s3conf", name) for name in ("CONN_ID_ENV", "S3Settings", "StorageError")},
    "s3a_jars": ("lake.s3a_jars", "s3a_jars"),
    **{
        name: ("lake.records", name)
        for name in ("RECEIVED_SCHEMA", "SCHEMA_VERSION", "SENT_SCHEMA", "read_schema_version")
    },
    **{name: ("secrecy", name) for name in ("on_remember", "redacted", "scrub_exception", "scrub_text", "scrubbed")},
    "cell_from_matrix": ("spec.kept", "cell_from_matrix"),
    "RegressionError": ("regressions", "RegressionError"),
    "published_run": ("regressions.history", "published_run"),
    "detect_regressions": ("regressions", "detect"),
    "write_regression_results": ("regressions", "write_results"),
    **{name: ("report", name) for name in ("build_run_report", "find_report", "tables_folder_name")},
    # What the benchmarks in bench/ measure the harness with (STYLE 17), beside the names above. A system's own
    # names (its servers, clients, native tools) are its package's `__all__` (bench_tasks/systems/exports.py).
    "select_cells": ("cell.runner", "select_cells"),
    "harness_context": ("cell.context", "harness_context"),
    "BrokerHandle": ("brokers.handles", "BrokerHandle"),
    **{name: ("cell.held", name) for name in ("held_brokers", "run_on_brokers")},
    "latest_run_id": ("lake.runs", "latest_run_id"),
    **{name: ("lake.records", name) for name in ("write_parquet", "write_parquet_parts")},
    "PhasePlan": ("core.schedule", "PhasePlan"),
    "PayloadFactory": ("load.payload", "PayloadFactory"),
    "ReceivedLog": ("load.receivedlog", "ReceivedLog"),
    **{name: ("load.loop", name) for name in ("run_precise", "tighten_timer_slack")},
    **{name: ("load.contract", name) for name in ("decode_event", "plan_keys", "write_plan")},
    "RECEIVER_WRITE_ROWS": ("load.receivedlog", "WRITE_ROWS"),
    "received_table": ("load.rawfiles", "received_table"),
    "convert_sample_file": ("load.rawfiles", "convert"),
    **{name: ("jvm.build", name) for name in ("java", "program_jar")},
    "copy_dependencies": ("brokers.maven", "copy_dependencies"),
    "verified_libs": ("brokers.maven", "verified_libs"),
    **{name: ("brokers.gobuild", name) for name in ("go_binary", "go_install", "go_version")},
    **{name: ("secrecy", name) for name in ("login_url", "without_userinfo")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'bench_tasks' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), attribute)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
