"""Background traffic: unmeasured workloads that load the broker while the measured one runs (seed 004).

Seed 004 measured a small EVENT stream (64 B, acks=all, one partition) while hundreds of TRAFFIC
producers (64 KB, one message a second each, many partitions, keyed or not) loaded the same cluster.
Hundreds of OS processes would measure the host, not the broker, so background producers are *logical*:
each is its own fixed-rate schedule (and, with `keys: per_producer`, its own key), and `processes` OS
processes multiplex them on one event loop and one client each. Background messages go to their own
topic (Kafka) or subject (NATS), are counted — scheduled, sent, acknowledged, errors, received, send lag —
and never timed: the measured workload's numbers are the result, background is the condition.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_serializer, model_validator

from .base import MessageSizeBytes, SettingsModel

# Fields of a background route that only systems with partitioned, keyed routes (and producer configs, and
# consumer groups that each read every message) honour.
PARTITIONED_FIELDS = ("keys", "partitions", "replication_factor", "topic", "producer", "subscriptions")


class Background(SettingsModel):
    """One named background workload of a cell; it runs for the cell's whole schedule."""

    message_size_bytes: MessageSizeBytes
    rate_per_producer_per_s: float = Field(gt=0, description="each logical producer's own rate")
    producers: int = Field(1, ge=0, description="logical producers; 0 switches the workload off (an axis value)")
    processes: int = Field(1, ge=1, description="OS processes the logical producers are spread over")
    consumers: int = Field(
        0, ge=0, description="unmeasured consumers reading it (one group where the system has groups)"
    )
    subscriptions: int = Field(
        1,
        ge=1,
        description="consumer groups reading it, each of `consumers` consumers and each reading every message "
        "(OMB's subscriptions per topic)",
    )
    arrival: Literal["uniform", "poisson"] = "uniform"
    keys: Literal["none", "round_robin", "random", "per_producer"] = Field(
        "none", description="keyed routes: per_producer gives every logical producer its own key"
    )
    partitions: int = Field(1, ge=1, description="partitioned routes: partitions of the background route")
    replication_factor: int = Field(
        1, ge=1, description="replicated routes: replication factor of the background route"
    )
    topic: dict[str, Any] = Field(default_factory=dict, description="the background route's own config, verbatim")
    producer: dict[str, Any] = Field(
        default_factory=dict, description="the client library's producer config for background producers, verbatim"
    )
    follows_rate: bool = Field(
        False,
        description="a capacity search scales this workload's rate with the rate it offers the measured one "
        "(the same ratio at every step), so load beside the measured route grows with it",
    )

    @model_serializer(mode="wrap")
    def _without_default_follow(self, handler: Any) -> dict[str, Any]:
        """A background that does not follow the searched rate, read by one group, dumps as before those fields
        existed: its cell ids stay the same."""
        data = handler(self)
        if not data.get("follows_rate"):
            data.pop("follows_rate", None)
        if data.get("subscriptions") == 1:
            del data["subscriptions"]
        return data

    @model_validator(mode="after")
    def _processes_fit(self) -> Background:
        if self.producers and self.processes > self.producers:
            raise ValueError(f"processes {self.processes} exceeds producers {self.producers}")
        if self.subscriptions > 1 and not self.consumers:
            raise ValueError(f"subscriptions {self.subscriptions} needs consumers >= 1 (the consumers of each)")
        return self

    @property
    def rate_per_s(self) -> float:
        return self.producers * self.rate_per_producer_per_s

    def partitioned_fields_set(self) -> list[str]:
        """Partitioned-route fields set to anything but their defaults (systems without such routes refuse them)."""
        fields = type(self).model_fields
        return [n for n in PARTITIONED_FIELDS if getattr(self, n) != fields[n].get_default(call_default_factory=True)]
