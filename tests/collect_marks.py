"""A pytest plugin for tests/unit/project/test_layout.py: after collecting, print each test's node
id and whether it is marked ``integration``, so one collection of the whole suite answers both of
its questions."""

from __future__ import annotations

import pytest

PREFIX = "collected-mark "


def pytest_collection_finish(session: pytest.Session) -> None:
    for item in session.items:
        print(f"{PREFIX}{item.get_closest_marker('integration') is not None} {item.nodeid}")
