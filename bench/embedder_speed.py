"""The numpy forward pass against an earlier checkout's and against ONNX Runtime (fp32), side by side.

CPU milliseconds a text (``time.process_time``, one BLAS / ONNX Runtime thread each, as the worker
runs with ``embedding.threads = 1``): the sample cases' queries encoded one at a time (what a case's
retrieval encodes), the sample precedents' summaries in one batch (a precedent build, a cold cache),
and the buyers' messages in one batch (short texts, as guideline rules are).
Repetitions interleaved; medians and the median of per-repetition ratios to this checkout's numpy.

``--before`` loads another checkout's ``precedents/bert.py`` (e.g. /work/main) beside this one. ONNX
Runtime runs when ``onnxruntime`` and ``onnx`` are installed (neither is a dependency): the graph is
written from the same safetensors with ``onnx.helper`` (``onnx_graph.py``), no torch and no download.

Run: .venv/bin/python bench/embedder_speed.py [--before ../main] [--reps 7]
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from cyberjurors.precedents.bert import BertEncoder
from cyberjurors.precedents.distill import summarize_case
from cyberjurors.precedents.embeddings import blas_threads, default_model_dir
from cyberjurors.precedents.retrieval import query_text
from cyberjurors.schemas import DisputeCase
from harness import EXAMPLES, machine, make_console, med, table

console = make_console(160)
Encode = Callable[[list[str]], np.ndarray]


def checkout_encoder(root: Path) -> Encode:
    spec = importlib.util.spec_from_file_location("bert_before", root / "cyberjurors/precedents/bert.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "cyberjurors.precedents"  # its relative imports resolve to this checkout's
    sys.modules[spec.name] = module  # for its dataclasses
    spec.loader.exec_module(module)
    return module.BertEncoder(default_model_dir()).encode


def onnx_encoder(encoder: BertEncoder) -> Encode | None:
    try:
        import onnxruntime as ort

        from onnx_graph import bert_graph
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(bert_graph(encoder), options, providers=["CPUExecutionProvider"])

    def encode(texts: list[str]) -> np.ndarray:
        pieces = [e.ids for e in encoder.tokenizer.encode_batch(texts)]
        ids = np.zeros((len(texts), max(map(len, pieces))), np.int64)
        mask = np.zeros(ids.shape, np.float32)
        for row, seq in enumerate(pieces):
            ids[row, : len(seq)], mask[row, : len(seq)] = seq, 1
        feed = {"input_ids": ids, "positions": np.arange(ids.shape[1], dtype=np.int64), "mask": mask}
        return session.run(None, feed)[0]

    return encode


def main(
    before: Annotated[Path | None, typer.Option(help="an earlier checkout to load bert.py from")] = None,
    reps: Annotated[int, typer.Option(help="interleaved repetitions")] = 7,
) -> None:
    blas_threads(1)
    encoder = BertEncoder(default_model_dir())
    ways: dict[str, Encode] = {"numpy (this)": encoder.encode}
    if before is not None:
        ways["numpy (before)"] = checkout_encoder(before)
    if (ort := onnx_encoder(encoder)) is not None:
        ways["onnxruntime fp32"] = ort
    cases = [DisputeCase.model_validate_json(p.read_text()) for p in sorted((EXAMPLES / "cases").glob("*.json"))]
    history = [DisputeCase.model_validate_json(p.read_text()) for p in sorted((EXAMPLES / "precedents").glob("*.json"))]
    work = {"queries, one at a time": [[query_text(c, None)] for c in cases],
            "summaries, one batch": [[summarize_case(c).summary for c in history]],
            "short messages, one batch": [[i.text for c in cases for _, i in c.texts("buyer") if i.text]]}  # fmt: skip
    reference = encoder.encode([t for batches in work.values() for batch in batches for t in batch])
    cpu: dict[tuple[str, str], list[float]] = {(w, n): [] for w in work for n in ways}
    for _ in range(reps):
        for name, encode in ways.items():
            for what, batches in work.items():
                started = time.process_time()
                for batch in batches:
                    encode(batch)
                cpu[what, name].append((time.process_time() - started) * 1000 / sum(map(len, batches)))
    out = table(
        "CPU ms a text, median",
        ["texts", "encoder", "median", "ratio to numpy (this)", "worst cosine"],
        left=("texts", "encoder"),
    )
    for name, encode in ways.items():
        vectors = np.vstack([encode(batch) for batches in work.values() for batch in batches])
        worst = float((vectors * reference).sum(1).min())
        for what in work:
            ratio = med([a / b for a, b in zip(cpu[what, name], cpu[what, "numpy (this)"], strict=True)])
            out.add_row(what, name, f"{med(cpu[what, name]):.1f}", f"{ratio:.2f}", f"{worst:.6f}")
    console.print(machine(), out)


if __name__ == "__main__":
    typer.run(main)
