"""What a case costs the worker in CPU, model calls aside: the worker process's user + system seconds
(``/proc/<pid>/stat``) from just before the cases are produced to their last verdict, per case.

Every model call goes through the real anthropic backend to a Messages-API double in a process of its
own (``tests/messages_server.py``'s ``StrictModel``: the documented refusals, the prompt cache billed),
answering at once. Its answers are schema-valid and read like answers (``varied``: sentences of the
prompt, enums and evidence drawn from a hash of the request, so ballots split and cases deliberate).
Cases: the samples (examples/cases + examples/incremental) and ``--synthetic`` synthetic ones
(``cyberjurors synth``), each without precedents and with the embedded precedent base that
``cyberjurors precedents build`` makes from examples/precedents (each checkout builds its own). One
warm-up case first (the embedding model loads at start, its first pass is slower).

``--sealed`` adds this checkout with ``payload_encryption`` (and ``media_encryption``) on, beside its runs
without, interleaved: what sealing every record and table value costs the worker (the keys held, as
``key_service.cache_s`` allows; a local key-encryption key).

``--python`` adds another checkout's interpreter (a main checkout's .venv/bin/python): its worker runs
its own code beside this one's, alternately, so the ratio is measured side by side on a noisy machine.
``--profile`` then samples this checkout's worker with py-spy (the dev extra) on the samples, with and
without precedents, and writes the top of each beside the figures (``--out``).

Run: .venv/bin/python bench/cpu_per_case.py [--reps 3] [--synthetic 200] [--synthetic-reps 1]
     [--synthetic-from FOLDER] [--python ../main/.venv/bin/python] [--sealed] [--profile] [--out build/cpu_per_case]
"""

from __future__ import annotations

import asyncio
import hashlib
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from harness import (
    EXAMPLES,
    BenchError,
    copies,
    cpu_seconds,
    free_port,
    machine,
    make_console,
    med,
    run_cases,
    sampled_top,
    table,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the Messages-API double lives with the tests
from cyberjurors.config import Settings
from cyberjurors.evaluation.synth import generate
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.kafka.producers import on_embedded
from cyberjurors.tooling.broker import start_broker, stop_process
from cyberjurors.tooling.clients import Outgoing, read_events
from cyberjurors.tooling.worker_process import WorkerProcess, child_env
from tests.messages_server import EVIDENCE_ID, FILLER, ScriptedServer, StrictModel, request_text

console = make_console(160)
SENTENCE = re.compile(r"[A-Z][^.!?\n<>]{20,240}[.!?]")
CLUE_ID = re.compile(r"\[([bs]\d+)\]")


def varied(body: dict[str, Any]) -> Any:
    prompt = request_text(body)
    rng, schema = random.Random(hashlib.sha256(prompt.encode()).digest()), body["output_config"]["format"]["schema"]
    sentences, evidence = SENTENCE.findall(prompt) or [FILLER], EVIDENCE_ID.findall(prompt)
    clues = sorted(set(CLUE_ID.findall(prompt)))

    def build(node: dict[str, Any], name: str = "") -> Any:
        if "$ref" in node:
            return build(schema["$defs"][node["$ref"].rsplit("/", 1)[-1]], name)
        if "anyOf" in node:
            if name == "evidence_id":
                return rng.choice([*evidence, None]) if evidence else None
            return build(next(o for o in node["anyOf"] if o.get("type") != "null"), name)
        if "enum" in node:
            return rng.choice(node["enum"])
        kind = node.get("type")
        if kind == "object":
            return {key: build(sub, key) for key, sub in node.get("properties", {}).items()}
        if kind == "array" and name == "cited_clues":
            return rng.sample(clues, min(2, len(clues)))
        if kind == "array":
            return [build(node.get("items", {}), name) for _ in range(rng.randint(1, node.get("maxItems", 3)))]
        if kind == "string":
            return rng.choice(sentences)[: node.get("maxLength")]
        return {"integer": 1, "number": 0.5, "boolean": False}.get(kind)

    return build(schema)


def serve(port: int) -> None:
    """The model, in a process of its own: its CPU is not the worker's."""

    async def forever() -> None:
        await ScriptedServer(respond=StrictModel(answers=varied)).start(port)
        await asyncio.Event().wait()

    asyncio.run(forever())


def built_base(python: str, settings: Settings, work: Path) -> Path:
    """The precedent base from examples/precedents, built by ``python``'s checkout (offline distiller)."""
    folder = work / f"base-{hashlib.sha256(python.encode()).hexdigest()[:8]}"
    if not (folder / "built").exists():
        env = child_env(settings.model_copy(update={"llm_backend": "offline", "precedent_dir": folder}))
        cmd = [python, "-m", "cyberjurors", "precedents", "build", str(EXAMPLES / "precedents")]
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        (folder / "built").touch()
    return folder


def one_run(
    python: str, base: Settings, events: list[Outgoing], media: Path, spy: Path | None = None
) -> tuple[float, str]:
    """CPU seconds per case of one worker of ``python``'s checkout judging ``events``, and what the
    cases did (model calls and rounds per case)."""
    run = base.datadir.parent / f"run-{uuid.uuid4().hex[:8]}"
    settings = base.model_copy(
        update={
            "app_id": f"cpu-{run.name}",
            "topic_prefix": f"{run.name}.",
            "datadir": run / "faust",
            "media_root": media,
        }
    )
    if settings.precedent_backend == "embedded":  # a copy of the built one: a worker may learn into it
        shutil.copytree(built_base(python, base, base.datadir.parent), run / "precedents")
        settings = settings.model_copy(update={"precedent_dir": run / "precedents"})
    asyncio.run(ensure_topics(settings))
    with WorkerProcess(settings, run / "worker.log", python=python) as worker:
        if not worker.wait_for("Worker ready", timeout_s=300):
            raise BenchError(f"the worker did not start; see {worker.log_path}")
        asyncio.run(run_cases(settings, copies(1, f"warm-{run.name}"), timeout_s=600))
        pid = worker.process.pid  # type: ignore[union-attr]
        spying = spy and subprocess.Popen(
            [Path(sys.executable).parent / "py-spy", "record", "--pid", str(pid), "--rate", "100", "--nonblocking",
             "--format", "raw", "--output", spy], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        before = cpu_seconds(pid)

        def alive() -> None:
            if not worker.alive():
                raise BenchError(f"the worker exited; see {worker.log_path}")

        burst = asyncio.run(run_cases(settings, events, timeout_s=3600, on_poll=alive))
        spent = cpu_seconds(pid) - before
        if spying:
            spying.send_signal(signal.SIGINT)  # py-spy writes its profile on an interrupt
            spying.wait(60)
    verdicts = [o.verdict for o in burst.outcomes.values() if o.verdict is not None]
    did = f"{sum(v.tokens.calls for v in verdicts) / len(verdicts):.0f} calls, {med([v.rounds_used for v in verdicts]):.0f} rounds a case"
    return spent / len(verdicts), did


def main(
    reps: Annotated[int, typer.Option(help="runs of the samples per checkout and setting, interleaved")] = 3,
    samples: Annotated[bool, typer.Option(help="run the sample cases (--no-samples: the synthetic ones only)")] = True,
    synthetic: Annotated[int, typer.Option(help="synthetic cases (0: none)")] = 200,
    synthetic_reps: Annotated[int, typer.Option(help="runs of the synthetic cases per checkout and setting")] = 1,
    synthetic_from: Annotated[Path | None, typer.Option(help="a `cyberjurors synth` folder to take them from")] = None,
    python: Annotated[list[str], typer.Option(help="another checkout's .venv/bin/python, run alternately")] = [],  # noqa: B006
    sealed: Annotated[bool, typer.Option(help="also run this checkout with payload_encryption on")] = False,
    profile: Annotated[bool, typer.Option(help="sample this checkout's worker with py-spy afterwards")] = False,
    out: Annotated[Path, typer.Option(help="where the profiles go")] = Path("build/cpu_per_case"),
) -> None:
    work = Path(tempfile.mkdtemp(prefix="cj-cpu-"))
    checkouts = {"this": sys.executable, **{Path(p).absolute().parents[2].name: p for p in python}}
    runs = {name: (interpreter, {}) for name, interpreter in checkouts.items()}
    if sealed:
        sealing = {"media_encryption": True, "payload_encryption": True, "case_key_secret": "bench-" + "k" * 32}
        (work / "kek").write_bytes(os.urandom(64))  # a local key-encryption key wraps each case key, as advised
        keys = {"case_key_store": str(work / "case-keys"), "key_service": {"kind": "local", "kek_file": work / "kek"}}
        runs["this, sealed"] = (sys.executable, sealing | keys)
    corpora = {"samples": (read_events([EXAMPLES / "cases", EXAMPLES / "incremental"]), EXAMPLES)} if samples else {}
    if synthetic:
        folder = synthetic_from or work / "synth"
        if synthetic_from is None:
            generate(folder, cases=synthetic, seed=0)  # ~10 minutes for 200 here: their clips are encoded
        corpora["synthetic"] = (read_events([folder / "cases.jsonl"])[:synthetic], folder)
    port = free_port()
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(port,), daemon=True)
    server.start()
    broker, bootstrap = start_broker(log=work / "broker.log")
    base = Settings(
        llm_backend="anthropic",
        anthropic_api_key="sk-ant-bench",
        anthropic_base_url=f"http://127.0.0.1:{port}",
        kafka_bootstrap_servers=bootstrap,
        metrics_port=0,
        probe_port=0,
        datadir=work / "faust",
        kafka_profile="local",
        kafka_timeouts={"broker_loss_exit_s": 300},  # a shared machine's load is no lost broker
    )
    base = base.model_copy(update=on_embedded(base))
    figures: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    console.print(f"{machine()}; checkouts {checkouts}; work folder {work}")
    try:
        for rep in range(max(reps, synthetic_reps)):
            for corpus, (events, media) in corpora.items():
                for store in ("none", "embedded") if rep < (reps if corpus == "samples" else synthetic_reps) else ():
                    for name, (interpreter, update) in runs.items():
                        settings = base.model_copy(update={"precedent_backend": store, **update})
                        cpu, did = one_run(interpreter, settings, events, media)
                        figures[corpus, store, name].append(cpu)
                        console.print(
                            f"rep {rep + 1}, {corpus}, precedents {store}, {name}: {cpu:.3f} CPU-s a case ({did})"
                        )
        report(figures, list(runs))
        if profile and samples:
            profiled(base, corpora["samples"], out)
    finally:
        stop_process(broker)
        server.kill()
    console.print(f"{machine()}")


def report(figures: dict[tuple[str, str, str], list[float]], checkouts: list[str]) -> None:
    others = [n for n in checkouts if n != "this"]
    ratios = [f"{n} / this" if n.startswith("this,") else f"this / {n}" for n in others]
    columns = ["cases", "precedents", *(f"{n}: median (runs)" for n in checkouts), *ratios]
    out = table("Worker CPU seconds per case, model calls answered at once", columns, left=("cases", "precedents"))
    for corpus, store in dict.fromkeys((c, s) for c, s, _ in figures):
        runs = {n: figures[corpus, store, n] for n in checkouts}
        cells = [f"{med(v):.3f} ({', '.join(f'{x:.2f}' for x in v)})" for v in runs.values()]
        # another checkout: this / it; this checkout with a setting changed (``this, sealed``): it / this
        pairs = [(runs["this"], runs[n]) if not n.startswith("this,") else (runs[n], runs["this"]) for n in others]
        ratio = [f"{med([a / b for a, b in zip(top, bottom, strict=True)]):.2f}" for top, bottom in pairs]
        out.add_row(corpus, store, *cells, *ratio)
    console.print(out)


def profiled(base: Settings, samples: tuple[list[Outgoing], Path], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for store in ("none", "embedded"):
        raw = out / f"profile-precedents-{store}.txt"
        cpu, did = one_run(sys.executable, base.model_copy(update={"precedent_backend": store}), *samples, spy=raw)
        title = f"samples, precedents {store}: {cpu:.3f} CPU-s a case under py-spy ({did})"
        with (out / f"top-precedents-{store}.txt").open("w") as handle:
            Console(file=handle, width=160).print(title, *sampled_top(raw, top=40))
        console.print(title, *sampled_top(raw, top=25))


if __name__ == "__main__":
    typer.run(main)
