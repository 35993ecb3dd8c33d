"""A worker under ``kafka_idempotence = on`` on a broker that refuses idempotence (the embedded one)
does not start: it says so and exits with EX_CONFIG, before Faust starts anything. (Under ``auto``
the worker's one warning is checked with a running worker in test_kcat.py.)"""

from __future__ import annotations

from cyberjurors.config import Settings
from cyberjurors.streams.worker import EXIT_CONFIG

from ..conftest import cli


def test_a_worker_that_requires_idempotence_the_broker_refuses_exits_saying_so(settings: Settings):
    done = cli(settings.model_copy(update={"kafka_idempotence": "on"}), "worker", timeout=90)
    assert done.returncode == EXIT_CONFIG == 78, done.stdout[-2000:] + done.stderr[-2000:]
    assert "worker not started:" in done.stdout and "kafka_idempotence=on" in done.stdout
    assert "Traceback" not in done.stderr
