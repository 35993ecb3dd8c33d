"""`cyberjurors demo` and `cyberjurors eval` stopped by SIGTERM or SIGINT: the command exits with
128 + the signal, and neither its embedded broker nor its worker (both in their own sessions, out
of reach of a terminal's signals) outlives it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import EXAMPLES
from .test_eval import sample_dataset

pytestmark = pytest.mark.integration

READY = "[^Worker]: Ready"
EXIT_TIMEOUT_S = 90  # a failure guard: the clean-up is bounded by the worker's 20 s and the broker's 5 s


def quiet_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The offline stand-in, slowed down so that cases are still in flight when the signal comes."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith("CYBERJURORS_") and k not in ("KAFKA_BOOTSTRAP_SERVERS", "ANTHROPIC_API_KEY")
    }
    return (
        env
        | {
            "CYBERJURORS_LLM_BACKEND": "offline",
            "CYBERJURORS_OFFLINE_LATENCY_S": "30",
            "CYBERJURORS_PRECEDENT_BACKEND": "none",
            "CYBERJURORS_METRICS_PORT": "0",
            "CYBERJURORS_KAFKA_PROFILE": "local",
            "CYBERJURORS_DATADIR": str(tmp_path / "demo" / "faust"),
            "CYBERJURORS_MEDIA_ROOT": str(EXAMPLES),
            "COLUMNS": "160",
        }
        | extra
    )


# --- processes, from /proc ----------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks) of a process, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[0], int(fields[19])


def descendants(pid: int) -> dict[int, tuple[int, str]]:
    """Every process below ``pid``: pid -> (start time, command line)."""
    found: dict[int, tuple[int, str]] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            for child in children:
                stat = _stat(child)
                if stat is None or child in found:
                    continue
                try:
                    cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    cmdline = ""
                found[child] = (stat[1], cmdline)
                todo.append(child)
    return found


def survivors(procs: dict[int, tuple[int, str]]) -> dict[int, str]:
    """Those still running: same pid and start time (not a reused pid), not a zombie."""
    alive = {}
    for pid, (started, cmdline) in procs.items():
        stat = _stat(pid)
        if stat is not None and stat[1] == started and stat[0] != "Z":
            alive[pid] = cmdline
    return alive


def wait_for_text(path: Path, text: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared in {path} (command exit code {process.poll()})")


def stop_and_check(
    command: subprocess.Popen, sig: signal.Signals, worker_log: Path, output: Path, again: signal.Signals | None = None
) -> float:
    """Once its worker is ready: the signal (and ``again`` while the clean-up waits for the worker), a
    bounded wait for the command's exit, then no survivors. Returns the seconds from the signal to the
    command's exit."""
    procs: dict[int, tuple[int, str]] = {}
    try:
        wait_for_text(worker_log, READY, command)
        time.sleep(2)  # not a measurement: eval sends its cases once the worker is ready; let them be in flight
        procs = descendants(command.pid)
        assert any("tansu" in c for _, c in procs.values()), procs
        assert any("cyberjurors worker" in c for _, c in procs.values()), procs
        sent = time.monotonic()
        if sig == signal.SIGINT:
            os.killpg(command.pid, sig)  # what a terminal's Ctrl-C does: the foreground process group
        else:
            command.send_signal(sig)  # what `kill` or a supervisor does
        if again is not None:
            time.sleep(0.5)
            command.send_signal(again)  # an impatient second signal: the worker is killed at once
        code = command.wait(timeout=EXIT_TIMEOUT_S)
        took = time.monotonic() - sent
        said = output.read_text(errors="replace")
        assert code == 128 + sig, f"exit code {code}:\n{said[-3000:]}"
        assert f"stopped by {sig.name}" in said and "Traceback" not in said, said[-3000:]
        assert survivors(procs) == {}, f"outlived the command: {survivors(procs)}"
        print(f"{sig.name}: exited in {took:.1f}s")
        return took
    finally:  # whatever failed above, leave nothing running
        if command.poll() is None:
            procs |= descendants(command.pid)
            command.kill()
            command.wait()
        for pid in survivors(procs):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def start(args: list[str], env: dict[str, str], output: Path, cwd: Path) -> subprocess.Popen:
    with output.open("wb") as out:  # the child keeps its own descriptor
        # as a terminal starts a foreground command: SIGINT at its default, even when this suite was
        # started in the background (nohup, `cmd &` in a script), which leaves SIGINT ignored for
        # every process it starts and so for the command, which then rightly ignores Ctrl-C
        return subprocess.Popen(
            [sys.executable, "-m", "cyberjurors", *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


@pytest.mark.parametrize(
    ("sig", "again"),
    [(signal.SIGTERM, None), (signal.SIGINT, None), (signal.SIGTERM, signal.SIGINT)],
    ids=["sigterm", "sigint", "sigterm-then-sigint"],
)
def test_eval_stopped_by_a_signal_leaves_no_process_behind(
    sig: signal.Signals, again: signal.Signals | None, tmp_path: Path
):
    data = sample_dataset(tmp_path / "data", ["appl-001-kettle-crack", "clot-001-shirt-torn-seam"])
    out = tmp_path / "eval"
    output = tmp_path / "eval-output.txt"
    command = start(
        ["eval", str(data), "--ablation", "jury", "--out", str(out), "--timeout", "600"],
        quiet_env(tmp_path),
        output,
        tmp_path,
    )
    stop_and_check(command, sig, out / "logs" / "jury.log", output, again)
    assert "the same command resumes" in output.read_text()
    assert not list(out.glob("report*")), "an interrupted run writes no report"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_demo_stopped_by_a_signal_leaves_no_process_behind(sig: signal.Signals, tmp_path: Path):
    output = tmp_path / "demo-output.txt"
    command = start(
        ["demo", str(EXAMPLES / "cases" / "appl-001-kettle-crack.json"), "--timeout", "600"],
        quiet_env(tmp_path),
        output,
        tmp_path,
    )
    stop_and_check(command, sig, tmp_path / "demo" / "worker.log", output)
