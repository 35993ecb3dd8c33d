"""A worker in a child process: what the demo, the benchmarks and the integration tests run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..config import Settings


def settings_env(settings: Settings) -> dict[str, str]:
    """Settings as CYBERJURORS_* environment variables, so a child process sees the same configuration."""
    env = {}
    for name, value in settings.model_dump(mode="json", exclude_none=True).items():
        env[f"CYBERJURORS_{name.upper()}"] = value if isinstance(value, str) else _json(value)
    return env


def _json(value: object) -> str:
    import json

    return json.dumps(value)


@dataclass
class WorkerProcess:
    settings: Settings
    log_path: Path
    process: subprocess.Popen | None = field(default=None, init=False)
    _log_start: int = field(default=0, init=False)

    def start(self) -> "WorkerProcess":
        env = {k: v for k, v in os.environ.items() if not k.startswith("CYBERJURORS_")}
        env |= settings_env(self.settings)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = self.log_path.open("ab")
        self.process = subprocess.Popen([sys.executable, "-m", "cyberjurors", "worker"], env=env,
                                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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

    def stop(self, timeout_s: float = 20) -> int | None:
        if not self.alive():
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        try:
            return self.process.wait(timeout=timeout_s)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill()
            return None
