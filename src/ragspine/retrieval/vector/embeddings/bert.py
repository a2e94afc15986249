"""A BERT encoder stack in numpy, shared by the numpy engines (e5 embeddings, SPLADE rerank).

Invariants:
- Attention runs text by text over its own tokens, so no padding enters a text's products or
  sums and a text's hidden states do not depend on the batch it is in (the batched matrix
  products compute each row independently).
- GELU is the tanh form (within 5e-4 of the erf form BERT was trained with; numpy has no erf).
- Pure functions of float32 arrays; the callers own the weights and the tokenisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class BertLayer:
    """One transformer layer's weights, as `x @ w` matrices (input dimension first)."""

    wqkv: np.ndarray  # (H, 3H): x @ wqkv → q|k|v
    bqkv: np.ndarray
    wo: np.ndarray
    bo: np.ndarray
    ln1: tuple[np.ndarray, np.ndarray]
    wi: np.ndarray
    bi: np.ndarray
    wf: np.ndarray
    bf: np.ndarray
    ln2: tuple[np.ndarray, np.ndarray]


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU, tanh form, in place (within 5e-4 of the erf form; numpy has no erf, and this is
    7x faster than a polynomial erf on large arrays)."""
    y = x * x
    y *= np.float32(0.044715)
    y += np.float32(1.0)
    y *= x
    y *= np.float32(0.7978845608028654)
    np.tanh(y, out=y)
    y += np.float32(1.0)
    y *= np.float32(0.5)
    x *= y
    return x


def layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """Layer normalisation over the last axis, float32."""
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return (centred / np.sqrt(var + eps) * w + b).astype(np.float32)


def encode_layers(
    x: np.ndarray, lengths: list[int], layers: list[BertLayer], heads: int, eps: float
) -> np.ndarray:
    """The hidden states after every layer: `x` is (n, width, H) embeddings (after the embedding
    layer norm), `lengths` each row's real token count; padded positions are never attended."""
    n, width, H = x.shape
    hd = H // heads
    scale = np.float32(1.0 / np.sqrt(hd))
    ctx = np.zeros((n, width, H), dtype=np.float32)  # padded positions stay 0
    for ly in layers:
        qkv = (x.reshape(n * width, H) @ ly.wqkv + ly.bqkv).reshape(n, width, 3, heads, hd)
        for r, length in enumerate(lengths):
            part = qkv[r, :length]
            q = np.ascontiguousarray(part[:, 0].transpose(1, 0, 2))  # heads, length, hd
            q *= scale
            att = q @ np.ascontiguousarray(part[:, 1].transpose(1, 2, 0))  # heads, length, length
            att -= att.max(axis=-1, keepdims=True)
            np.exp(att, out=att)
            total = att.sum(axis=-1, keepdims=True)
            head = att @ np.ascontiguousarray(part[:, 2].transpose(1, 0, 2))
            head /= total  # softmax's division, on the (length × hd) result
            ctx[r, :length] = head.transpose(1, 0, 2).reshape(length, H)
        x = layernorm(x + (ctx.reshape(n * width, H) @ ly.wo + ly.bo).reshape(n, width, H), *ly.ln1, eps)
        mid = x.reshape(n * width, H) @ ly.wi + ly.bi
        x = layernorm(x + (gelu(mid) @ ly.wf + ly.bf).reshape(n, width, H), *ly.ln2, eps)
    return x
