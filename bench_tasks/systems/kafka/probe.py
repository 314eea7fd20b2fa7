"""Which Kafka release a running cluster is, as the cluster reports it: `kafka-features.sh describe`
(`org.apache.kafka.tools.FeatureCommand` over the Admin API); `metadata.version`'s newest supported level names the
release line (`4.3-IV0` -> `4.3`): Kafka's protocol carries no patch version.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import BrokerError
from ...secrecy import write_secret
from .jvm import TOOL_JVM_OPTS, java_binary
from .properties import render_properties
from .release import newest_release, tools_classpath
from .security import JAAS_MODULE, jaas_config

FEATURE_TOOL_CLASS = "org.apache.kafka.tools.FeatureCommand"


_FEATURE_LINE = re.compile(r"(\w+):\s*(\S+)")


_RELEASE_LINE = re.compile(r"^(\d+\.\d+)-IV\d+$")


def reported_version(
    bootstrap: str, client: Mapping[str, Any] | None = None, timeout_s: float = 90.0
) -> dict[str, Any]:
    """The cluster's own word on what it runs: `version` is the release line of the newest `metadata.version` its
    brokers support (SupportedMaxVersion), beside the finalized level and every feature as the tool printed it.
    `client` holds librdkafka security settings; they are translated for the Java tool into a 0600 file that
    is deleted at once. Raises BrokerError when the cluster cannot be asked."""
    tool_version = newest_release()
    libs = tools_classpath(tool_version)
    java = java_binary()
    with tempfile.TemporaryDirectory(prefix="sixnines-features-") as tmp:
        config = write_secret(Path(tmp) / "client.properties", render_properties(java_client_properties(client or {})))
        cmd = [
            java,
            *TOOL_JVM_OPTS,
            "-cp",
            f"{libs}/*",
            FEATURE_TOOL_CLASS,
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            str(config),
            "describe",
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(
                f"{FEATURE_TOOL_CLASS} describe got no answer from {bootstrap} in {timeout_s:.0f}s"
            ) from exc
    if done.returncode != 0:
        raise BrokerError(f"{FEATURE_TOOL_CLASS} describe against {bootstrap} failed: {done.stderr.strip()[-500:]}")
    features = parse_features(done.stdout)
    metadata = features.get("metadata.version", {})
    line = _RELEASE_LINE.match(metadata.get("SupportedMaxVersion", ""))
    return {
        "version": line.group(1) if line else "unknown",
        "version_source": f"metadata.version SupportedMaxVersion from {FEATURE_TOOL_CLASS} describe (kafka-tools "
        f"{tool_version}, Admin API DescribeFeatures): Kafka reports its release line, not the patch",
        "metadata_version": metadata,
        "features": features,
    }


def parse_features(text: str) -> dict[str, dict[str, str]]:
    """`Feature: metadata.version\\tSupportedMinVersion: 3.0-IV1\\tSupportedMaxVersion: 3.9-IV0…` lines → a map."""
    features: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        fields = dict(_FEATURE_LINE.findall(line))
        name = fields.pop("Feature", None)
        if name:
            features[name] = fields
    return features


def java_client_properties(client: Mapping[str, Any]) -> dict[str, str]:
    """librdkafka security settings as the Java client spells them (JAAS for SASL, a PEM truststore for TLS)."""
    props: dict[str, str] = {}
    if "security.protocol" in client:
        props["security.protocol"] = str(client["security.protocol"])
    mechanism = client.get("sasl.mechanism") or client.get("sasl.mechanisms")
    if mechanism:
        props["sasl.mechanism"] = str(mechanism)
        user, password = str(client.get("sasl.username", "")), str(client.get("sasl.password", ""))
        props["sasl.jaas.config"] = jaas_config(JAAS_MODULE[str(mechanism)], username=user, password=password)
    if client.get("ssl.ca.location"):
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(client["ssl.ca.location"])}
    return props
