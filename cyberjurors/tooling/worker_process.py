"""A worker in a child process: what the demo, the benchmarks and the integration tests run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ECOSYSTEM_ENV, ENV_PREFIX, Settings


def settings_env(settings: Settings) -> dict[str, str]:
    """Settings as CYBERJURORS_* environment variables, so a child process sees the same configuration."""
    env = {}
    for name, value in settings.model_dump(mode="json", exclude_none=True).items():
        env[f"{ENV_PREFIX}{name.upper()}"] = value if isinstance(value, str) else _json(value)
    return env


def child_env(settings: Settings, inherited: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process that must run with exactly these settings: the inherited
    one without any CYBERJURORS_* variable (the settings file included) or ecosystem name that
    Settings reads (KAFKA_BOOTSTRAP_SERVERS, ANTHROPIC_API_KEY, ...), plus ``settings_env``. The
    CYBERJURORS_* names would win anyway (see config/settings.py); dropping the others also keeps a setting
    the parent left unset (None) from being filled in by an exported ecosystem name."""
    inherited = os.environ if inherited is None else inherited
    env = {k: v for k, v in inherited.items() if not k.upper().startswith(ENV_PREFIX) and k not in ECOSYSTEM_ENV}
    return env | settings_env(settings)


def _json(value: object) -> str:
    import json

    return json.dumps(value)


@dataclass
class WorkerProcess:
    """A ``cyberjurors worker`` child in its own session (a terminal's Ctrl-C reaches only its parent,
    which stops it before the broker). As a context manager (or ``ExitStack.push``) it is stopped on
    leaving the block: given ``STOP_TIMEOUT_S`` to finish in-flight work, or only
    ``INTERRUPTED_STOP_TIMEOUT_S`` when the block is left by an interrupt (KeyboardInterrupt,
    SystemExit). Killing it then loses nothing: each stage stores its output before sending it on,
    and the replayed input re-sends the stored output. The worker bounds its own stop too
    (``stop_deadline_s``, status ``worker.EXIT_STOP_DEADLINE``), and exits by itself with
    ``worker.EXIT_BROKER_LOST`` when its broker lost its state: ``process.returncode`` says which,
    and ``start()`` again is what a supervisor does then."""

    STOP_TIMEOUT_S = 20.0
    INTERRUPTED_STOP_TIMEOUT_S = 5.0

    settings: Settings
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    """Variables set beside the settings (a benchmark names each worker's Kafka client this way)."""
    python: str = sys.executable
    """The interpreter to run it with (a test runs a worker from a core-only install this way)."""
    process: subprocess.Popen | None = field(default=None, init=False)
    _log_start: int = field(default=0, init=False)

    def __enter__(self) -> WorkerProcess:
        return self if self.process is not None else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        interrupted = exc is not None and not isinstance(exc, Exception)
        self.stop(self.INTERRUPTED_STOP_TIMEOUT_S if interrupted else self.STOP_TIMEOUT_S)

    def start(self) -> WorkerProcess:
        env = child_env(self.settings.for_worker()) | self.env
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [self.python, "-m", "cyberjurors", "worker"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def wait_for(self, *markers: str, timeout_s: float = 120) -> bool:
        """Until this run's log has shown any one of each group of markers ("a|b" = a or b); False
        if the worker exits or the time runs out first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.alive():
            with self.log_path.open("rb") as log:
                log.seek(self._log_start)
                text = log.read().decode(errors="replace")
            if all(any(m in text for m in group.split("|")) for group in markers):
                return True
            time.sleep(0.2)
        return False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the crash a worker must survive."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)  # type: ignore[union-attr]
            self.process.wait()  # type: ignore[union-attr]

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (Faust leaves its group and closes its tables), then SIGKILL to its whole session
        if it has not exited within the timeout, or at once if the wait is interrupted (a second
        Ctrl-C or SIGTERM): the worker never outlives this call. Safe before start()."""
        if not self.alive():
            return self.process.returncode if self.process else None
        try:
            self.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
            return self.process.wait(timeout=timeout_s)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        except BaseException:
            self.kill()
            raise
