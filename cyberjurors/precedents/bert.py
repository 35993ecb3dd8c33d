"""A BERT sentence encoder in numpy: the forward pass sentence-transformers runs through torch, for
the mean-pooled, normalised models such as all-MiniLM-L6-v2, without torch.

The weights are memory-mapped from ``model.safetensors`` (read-only and shared between the worker
processes of a node); the word pieces come from the model's own ``tokenizer.json`` through
Hugging Face's ``tokenizers``. Only the architecture sentence-transformers' ``Transformer`` +
``Pooling(mean)`` + ``Normalize`` stack builds for a ``BertModel`` is supported; anything else is
refused when the model is opened, not guessed at.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from ..errors import CyberJurorsError

BATCH_TOKENS = 4096  # word pieces a forward pass holds at most (16 texts of 256 pieces)
FFN_ROWS = 256  # word pieces through the feed-forward block at a time: 1.5 MB a temporary
DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}


class ModelFormatError(CyberJurorsError, ValueError):
    """The folder does not hold a model this encoder can run (says which file and why)."""

    kind = "model_format"


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a read-only view into one memory map of it.

    The format is an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
    shape and byte range, then the raw bytes. The ``safetensors`` package copies each tensor into
    memory for numpy; a map keeps the weights out of the worker's private memory.
    """
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise ModelFormatError(f"{path} is not a safetensors file (too short)")
        (length,) = struct.unpack("<Q", head)
        if length > min(size - 8, 100_000_000):
            raise ModelFormatError(f"{path} is not a safetensors file (header length {length})")
        try:
            header = json.loads(handle.read(length))
        except ValueError as err:
            raise ModelFormatError(f"{path} is not a safetensors file (header is not JSON)") from err
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + length)
    tensors = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = DTYPES.get(spec.get("dtype"))
        begin, end = spec["data_offsets"]
        if dtype is None or not 0 <= begin <= end <= data.size:
            raise ModelFormatError(f"{path}: tensor {name!r} has dtype {spec.get('dtype')} or offsets out of range")
        tensors[name] = data[begin:end].view(dtype).reshape(spec["shape"])
    return tensors


@dataclass(frozen=True)
class BertConfig:
    hidden: int
    layers: int
    heads: int
    eps: float
    max_tokens: int

    @classmethod
    def read(cls, folder: Path) -> BertConfig:
        try:
            config = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError) as err:
            raise ModelFormatError(f"{folder / 'config.json'}: {err}") from err
        if config.get("model_type") != "bert" or config.get("hidden_act") not in ("gelu", None):
            raise ModelFormatError(
                f"{folder} holds a {config.get('model_type')!r} model with "
                f"{config.get('hidden_act')!r} activation; this encoder runs BERT with GELU"
            )
        pooling = _read_json(folder / "1_Pooling" / "config.json", {"pooling_mode_mean_tokens": True})
        if not pooling.get("pooling_mode_mean_tokens") or any(
            pooling.get(mode)
            for mode in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
        ):
            raise ModelFormatError(f"{folder} pools other than by the mean of its tokens")
        bert = _read_json(folder / "sentence_bert_config.json", {})
        return cls(
            hidden=config["hidden_size"],
            layers=config["num_hidden_layers"],
            heads=config["num_attention_heads"],
            eps=config.get("layer_norm_eps", 1e-12),
            max_tokens=min(bert.get("max_seq_length", 512), config["max_position_embeddings"]),
        )


def _read_json(path: Path, default: dict) -> dict:
    if not path.exists():
        return default
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise ModelFormatError(f"{path} is not JSON: {err}") from err


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), with erfc from Numerical Recipes (fractional error below
    1.2e-7 everywhere: float32's own precision). numpy has no erf, and scipy is 100 MB. In place
    where it can be: this is the largest elementwise step of the pass."""
    z = np.abs(x)
    z *= np.float32(1 / np.sqrt(2))
    t = z * np.float32(0.5)
    t += 1
    np.reciprocal(t, out=t)
    poly = t * np.float32(0.17087277)
    for coefficient in (
        -0.82215223,
        1.48851587,
        -1.13520398,
        0.27886807,
        -0.18628806,
        0.09678418,
        0.37409196,
        1.00002368,
    ):
        poly += np.float32(coefficient)
        poly *= t
    poly -= np.float32(1.26551223)
    np.square(z, out=z)
    poly -= z
    np.exp(poly, out=poly)
    poly *= t  # erfc(|x| / sqrt 2); Phi(x) = erfc / 2 below zero, 1 - erfc / 2 above
    np.subtract(2, poly, out=poly, where=x >= 0)
    poly *= x
    poly *= np.float32(0.5)
    return poly


class BertEncoder:
    """Sentence vectors of a BERT model: token embeddings -> N transformer layers -> the mean of
    the unpadded tokens -> L2 normalised. Stateless after construction, so threads may share it."""

    def __init__(self, folder: Path):
        self.config = BertConfig.read(folder)
        self.weights = {
            name.removeprefix("bert."): tensor
            for name, tensor in read_safetensors(folder / "model.safetensors").items()
        }
        missing = [name for name in self._names() if name not in self.weights]
        if missing:
            raise ModelFormatError(
                f"{folder / 'model.safetensors'} lacks {len(missing)} BERT tensors, e.g. {missing[0]!r}"
            )
        try:
            self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as err:  # tokenizers raises a bare Exception for a file it cannot parse
            raise ModelFormatError(f"{folder / 'tokenizer.json'}: {err}") from err
        self.tokenizer.enable_truncation(self.config.max_tokens)
        self.tokenizer.no_padding()  # padded per batch below, to the batch's longest text
        self.dims = self.config.hidden

    def _names(self) -> list[str]:
        names = [
            "embeddings.word_embeddings.weight",
            "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight",
            "embeddings.LayerNorm.weight",
        ]
        for layer in range(self.config.layers):
            prefix = f"encoder.layer.{layer}."
            names += [
                prefix + part + ".weight"
                for part in (
                    "attention.self.query",
                    "attention.self.key",
                    "attention.self.value",
                    "attention.output.dense",
                    "attention.output.LayerNorm",
                    "intermediate.dense",
                    "output.dense",
                    "output.LayerNorm",
                )
            ]
        return names

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """(len(texts), dims) float32 rows of unit length. Texts are batched by length, as
        sentence-transformers does, so a batch pads little; a batch also holds at most
        BATCH_TOKENS word pieces, which bounds the attention scores' memory (heads x tokens x length)."""
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        start = 0
        while start < len(order):
            longest = max(len(encodings[order[start]].ids), 1)
            chosen = order[start : start + max(1, min(batch_size, BATCH_TOKENS // longest))]
            out[chosen] = self._forward([encodings[i].ids for i in chosen])
            start += len(chosen)
        return out

    def _forward(self, pieces: list[list[int]]) -> np.ndarray:
        w, eps = self.weights, self.config.eps
        length = max(map(len, pieces))
        ids = np.zeros((len(pieces), length), dtype=np.int64)
        mask = np.zeros((len(pieces), length), dtype=np.float32)
        for row, seq in enumerate(pieces):
            ids[row, : len(seq)], mask[row, : len(seq)] = seq, 1
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        # padding attends to nothing: the most negative float32, as transformers' extended mask
        bias = ((1 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in range(self.config.layers):
            x = self._layer(x, bias, f"encoder.layer.{layer}.")
        summed = (x * mask[:, :, None]).sum(1)
        pooled = summed / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def _layer(self, x: np.ndarray, bias: np.ndarray, prefix: str) -> np.ndarray:
        """One transformer layer. The attention scores are made one text at a time and the
        feed-forward block FFN_ROWS word pieces at a time, so the memory a pass needs beyond the
        weights stays a few MB whatever the batch: a worker's peak RSS is its steady RSS."""
        w, eps, heads = self.weights, self.config.eps, self.config.heads
        batch, length, hidden = x.shape
        size = hidden // heads

        def dense(name: str, value: np.ndarray) -> np.ndarray:
            # as one 2-D product: numpy's broadcast (batch, length, in) @ (in, out) skips BLAS, 30x slower
            return value @ w[prefix + name + ".weight"].T + w[prefix + name + ".bias"]

        flat = x.reshape(-1, hidden)
        q, k, v = (
            dense(f"attention.self.{n}", flat).reshape(batch, length, heads, size).transpose(0, 2, 1, 3)
            for n in ("query", "key", "value")
        )
        context = np.empty((batch, length, heads, size), dtype=np.float32)
        for row in range(batch):
            scores = q[row] @ k[row].transpose(0, 2, 1)  # (heads, length, length): softmax in place
            scores *= np.float32(1 / np.sqrt(size))
            scores += bias[row]
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context[row] = (scores @ v[row]).transpose(1, 0, 2)
        attended = dense("attention.output.dense", context.reshape(-1, hidden))
        attended += flat
        attended = _layer_norm(
            attended,
            w[prefix + "attention.output.LayerNorm.weight"],
            w[prefix + "attention.output.LayerNorm.bias"],
            eps,
        )
        out = np.empty_like(attended)
        for start in range(0, attended.shape[0], FFN_ROWS):
            rows = attended[start : start + FFN_ROWS]
            out[start : start + FFN_ROWS] = dense("output.dense", _gelu(dense("intermediate.dense", rows))) + rows
        out = _layer_norm(out, w[prefix + "output.LayerNorm.weight"], w[prefix + "output.LayerNorm.bias"], eps)
        return out.reshape(batch, length, hidden)
