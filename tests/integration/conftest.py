"""Every test under tests/integration/ is marked ``integration``, whether or not its file says so, so
that the fast lane (``-m "not integration"``) never starts a worker, Prometheus or a browser.
tests/unit/project/test_layout.py checks the marks both ways."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cyberjurors.llm.local_server import LocalServer, LocalServerError, local_server

HERE = Path(__file__).resolve().parent
SERVER_PYTHON = HERE.parents[1] / ".venv-llm" / "bin" / "python"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def local_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct (cyberjurors/llm/local_server.py),
    from the venv ``make llm-server`` builds (``make test`` builds it first), started once per test
    process and stopped after. Skipped only when that venv is not there; a GGUF that is there but not
    the pinned one, or a server that does not start, fails."""
    if not (SERVER_PYTHON.parent.parent / ".built").is_file():
        pytest.skip(
            f"no local model server at {SERVER_PYTHON.parent.parent}: `make llm-server` builds it (llama-cpp-python "
            "from its sdist, needs gcc, cmake and ninja); `make test` does so before the tests"
        )
    try:
        with local_server(SERVER_PYTHON, log=tmp_path_factory.mktemp("llm-server") / "server.log") as server:
            yield server
    except LocalServerError as err:
        pytest.fail(f"the local model server ({err.kind}): {err.detail}")
