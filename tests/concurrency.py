"""What the tests of bounded pools share: a spy on a function that runs in threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Peak:
    """Calls ``real`` and records the most calls running at once. Each call stays (up to a second)
    while one more than ``bound`` could join: if the bound did not hold, one would, and ``most``
    would show it. The wait is never asserted on."""

    def __init__(self, real: Callable[..., Any], bound: int) -> None:
        self.real, self.bound = real, bound
        self.active = self.most = 0
        self.changed = threading.Condition()

    def __call__(self, *args: Any) -> Any:
        with self.changed:
            self.active += 1
            self.most = max(self.most, self.active)
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.active > self.bound, timeout=1.0)
        try:
            return self.real(*args)
        finally:
            with self.changed:
                self.active -= 1
