"""Every test under tests/integration/ is marked ``integration``, whether or not its file says so, so
that the fast lane (``-m "not integration"``) never starts a worker, Prometheus or a browser.
tests/unit/project/test_layout.py checks the marks both ways."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.integration)
