"""The numpy embedder's BERT as an ONNX graph, written from the same memory-mapped safetensors with
``onnx.helper`` (no torch, no download): what bench/embedder_speed.py runs on ONNX Runtime. The same
steps as ``precedents/bert.py``: embeddings, N layers of attention and a GELU feed-forward block, the
mean of the unpadded tokens, L2-normalised. Inputs: word-piece ids (texts x length), their positions
(0..length-1) and the padding mask (1 for a piece, 0 for padding)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from cyberjurors.precedents.bert import BertEncoder


def bert_graph(encoder: BertEncoder) -> bytes:
    w, cfg = encoder.weights, encoder.config
    hidden, heads = cfg.hidden, cfg.heads
    size = hidden // heads
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op, inputs, out, **attrs):
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(x, prefix, out):
        m = node("MatMul", [x, const(prefix + ".wT", np.asarray(w[prefix + ".weight"]).T)], out + ".mm")
        return node("Add", [m, const(prefix + ".b", np.asarray(w[prefix + ".bias"]))], out)

    def norm(x, prefix, out):
        return node(
            "LayerNormalization",
            [
                x,
                const(prefix + ".g", np.asarray(w[prefix + ".weight"])),
                const(prefix + ".bb", np.asarray(w[prefix + ".bias"])),
            ],
            out,
            axis=-1,
            epsilon=cfg.eps,
        )

    words = node("Gather", [const("wemb", np.asarray(w["embeddings.word_embeddings.weight"])), "input_ids"], "words")
    pos = node("Gather", [const("pemb", np.asarray(w["embeddings.position_embeddings.weight"])), "positions"], "pos")
    x = node("Add", [words, pos], "e1")
    x = node("Add", [x, const("temb", np.asarray(w["embeddings.token_type_embeddings.weight"][0]))], "e2")
    x = norm(x, "embeddings.LayerNorm", "e3")
    # mask (B, L) float -> additive bias (B, 1, 1, L)
    inv = node("Sub", [const("one", np.array(1, np.float32)), "mask"], "inv")
    bias = node("Mul", [inv, const("neg", np.array(np.finfo(np.float32).min, np.float32))], "biasf")
    bias = node("Unsqueeze", [bias, const("ax12", np.array([1, 2], np.int64))], "bias")
    shape_heads = const("shape_heads", np.array([0, 0, heads, size], np.int64))
    shape_back = const("shape_back", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(1 / np.sqrt(size), np.float32))
    for layer in range(cfg.layers):
        p = f"encoder.layer.{layer}."
        qkv = []
        for n in ("query", "key", "value"):
            t = linear(x, p + "attention.self." + n, f"l{layer}{n}")
            t = node("Reshape", [t, shape_heads], f"l{layer}{n}.r")
            qkv.append(node("Transpose", [t], f"l{layer}{n}.t", perm=[0, 2, 1, 3] if n != "key" else [0, 2, 3, 1]))
        s = node("MatMul", [qkv[0], qkv[1]], f"l{layer}s")
        s = node("Mul", [s, scale], f"l{layer}ss")
        s = node("Add", [s, bias], f"l{layer}sb")
        s = node("Softmax", [s], f"l{layer}p", axis=-1)
        c = node("MatMul", [s, qkv[2]], f"l{layer}c")
        c = node("Transpose", [c], f"l{layer}ct", perm=[0, 2, 1, 3])
        c = node("Reshape", [c, shape_back], f"l{layer}cr")
        a = linear(c, p + "attention.output.dense", f"l{layer}a")
        a = node("Add", [a, x], f"l{layer}ar")
        a = norm(a, p + "attention.output.LayerNorm", f"l{layer}an")
        h = linear(a, p + "intermediate.dense", f"l{layer}h")
        # exact GELU: x * 0.5 * (1 + erf(x / sqrt 2))
        e = node("Div", [h, const(f"sq{layer}", np.array(np.sqrt(2), np.float32))], f"l{layer}g1")
        e = node("Erf", [e], f"l{layer}g2")
        e = node("Add", [e, const(f"o{layer}", np.array(1, np.float32))], f"l{layer}g3")
        e = node("Mul", [h, e], f"l{layer}g4")
        e = node("Mul", [e, const(f"h{layer}", np.array(0.5, np.float32))], f"l{layer}g5")
        o = linear(e, p + "output.dense", f"l{layer}o")
        o = node("Add", [o, a], f"l{layer}or")
        x = norm(o, p + "output.LayerNorm", f"l{layer}on")
    m3 = node("Unsqueeze", ["mask", const("ax2", np.array([2], np.int64))], "m3")
    summed = node(
        "ReduceSum", [node("Mul", [x, m3], "xm"), const("ax1", np.array([1], np.int64))], "summed", keepdims=0
    )
    count = node("ReduceSum", ["mask", const("ax1b", np.array([1], np.int64))], "count", keepdims=1)
    count = node("Max", [count, const("tiny", np.array(1e-9, np.float32))], "countc")
    pooled = node("Div", [summed, count], "pooled")
    normed = node("LpNormalization", [pooled], "vectors", axis=-1, p=2)
    graph = helper.make_graph(
        nodes,
        "minilm",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "L"]),
            helper.make_tensor_value_info("positions", TensorProto.INT64, ["L"]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "L"]),
        ],
        [helper.make_tensor_value_info(normed, TensorProto.FLOAT, ["B", hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()
