"""Suite over the faults table before it is published (spark_jobs.gate_frames.faults_frame).

Every row names its run, cell, place in firing order and action; and where the cell's durability settings
promise that a message the broker acknowledged survives one node's fault (`durable_acks`: Kafka acks=all on
RF >= 3 with min.insync.replicas >= 2, JetStream R3 file storage, a RabbitMQ quorum queue of three with
confirms and manual acks, each declared by its system's `promises_no_acknowledged_loss`), the fault cost no
acknowledged message: `acknowledged_but_lost_promised` (the fault's acknowledged_but_lost where the cell
promises, else 0) is 0.
"""

from __future__ import annotations

import great_expectations as gx
import great_expectations.expectations as gxe

KEY_COLUMNS = ("run_id", "cell_id", "repeat", "fault", "kind")


def build_faults_suite() -> gx.ExpectationSuite:
    """len(KEY_COLUMNS) + 1 expectations (asserted by a test)."""
    expectations: list[gxe.Expectation] = [gxe.ExpectColumnValuesToNotBeNull(column=c) for c in KEY_COLUMNS]
    expectations.append(
        gxe.ExpectColumnValuesToBeBetween(column="acknowledged_but_lost_promised", min_value=0, max_value=0)
    )
    return gx.ExpectationSuite(name="faults", expectations=expectations)
