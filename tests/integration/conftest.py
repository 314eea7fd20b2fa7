"""Integration tests talk to a real nats-server on 127.0.0.1; they are marked so `-m "not integration"`
gives a quick unit run."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
