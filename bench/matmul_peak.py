"""Same-run matrix-multiply rates on an e5-sized product (512 tokens × 384 → 1536: one text at
the token limit, as the int8 engine runs it), per number format, measured by the runtimes the e5
engines use: the ceiling an engine's GFLOP/s is a share of.

- float32: numpy's BLAS (`a @ b`) and OpenVINO's CPU MatMul (float32 hint).
- int8: ONNX Runtime's `MatMulInteger` (uint8 activations × int8 weights → int32), the kernel
  under the int8 engine's quantised products (MLAS: AVX2 `vpmaddubsw`, VNNI/AMX where present);
  and OpenVINO's int8 MatMul (a FakeQuantize pair, which its CPU plugin runs in int8).
- bf16: OpenVINO's MatMul compiled with the bf16 precision hint, with the precision it actually
  chose: on a CPU without bf16 units it runs float32 and the row says so.

Run alone (`python -m bench.matmul_peak`), each rate is the best of `rounds` timings of `repeats`
products. `bench.embed_bench` runs `products()` interleaved with the engines' batches instead,
so an engine's rate and the peak it is a share of are measured over the same seconds of a
shared machine. Rows whose runtime is missing are kept with the reason and no rate.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

import numpy as np

M, K, N = 512, 384, 1536  # one text at the 512-token limit × a feed-forward product
FLOP = 2 * M * K * N


def best_rate(run: Callable[[], Any], repeats: int = 10, rounds: int = 3) -> float:
    """GFLOP/s of `run` (one M×K×N product), best of `rounds` timings of `repeats` calls."""
    run()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        best = min(best, (time.perf_counter() - start) / repeats)
    return FLOP / best / 1e9


def numpy_fp32() -> Callable[[], Any]:
    rng = np.random.default_rng(0)
    a, b = rng.random((M, K), dtype=np.float32), rng.random((K, N), dtype=np.float32)
    return lambda: a @ b


def ort_int8() -> Callable[[], Any]:
    import onnx
    import onnxruntime as ort

    helper, tp = onnx.helper, onnx.TensorProto
    rng = np.random.default_rng(0)
    weight = onnx.numpy_helper.from_array(rng.integers(-127, 128, (K, N), dtype=np.int8), "w")
    node = helper.make_node("MatMulInteger", ["a", "w"], ["y"])
    graph = helper.make_graph(
        [node], "mm", [helper.make_tensor_value_info("a", tp.UINT8, [M, K])],
        [helper.make_tensor_value_info("y", tp.INT32, [M, N])], [weight],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    a = rng.integers(0, 256, (M, K), dtype=np.uint8)
    return lambda: session.run(["y"], {"a": a})


def _ov_matmul(hint: str, int8: bool = False) -> tuple[Callable[[], Any], str]:
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(0)
    x = ops.parameter([M, K], np.float32, name="x")
    w = ops.constant(rng.standard_normal((K, N)).astype(np.float32))
    if int8:  # activations and weights each through a 256-level FakeQuantize: the plugin runs int8
        lo, hi = ops.constant(np.float32(-4.0)), ops.constant(np.float32(4.0))
        x_q = ops.fake_quantize(x, lo, hi, lo, hi, 256)
        w_q = ops.fake_quantize(w, lo, hi, lo, hi, 255)
        y = ops.matmul(x_q, w_q, False, False)
    else:
        y = ops.matmul(x, w, False, False)
    model = ov.Model([y], [x], "mm")
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    a = rng.standard_normal((M, K)).astype(np.float32)
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    chosen = precision.to_string() if hasattr(precision, "to_string") else str(precision)
    return (lambda: request.infer({0: a})), chosen


Product = tuple[str, str, Callable[[], Any] | None, str]  # format, runtime, one product (None: not run), note


def products() -> list[Product]:
    """The products measured, each ready to run: (format, runtime, callable or None, note)."""
    rows: list[Product] = [("fp32", "numpy BLAS", numpy_fp32(), "")]
    has_ort = all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))
    rows.append(("int8", "ONNX Runtime MatMulInteger", ort_int8() if has_ort else None, "" if has_ort else "not installed"))
    if importlib.util.find_spec("openvino") is None:
        return [*rows, ("bf16", "OpenVINO", None, "openvino not installed")]
    rows.append(("fp32", "OpenVINO MatMul", _ov_matmul("f32")[0], ""))
    rows.append(("int8", "OpenVINO MatMul (FakeQuantize)", _ov_matmul("f32", int8=True)[0], ""))
    run, chosen = _ov_matmul("bf16")
    rows.append(("bf16", "OpenVINO MatMul, bf16 hint", run, "" if chosen == "bf16" else f"no bf16 units: OpenVINO ran it as {chosen}"))
    return rows


def peaks() -> list[tuple[str, str, float | None, str]]:
    """Rows (format, runtime, GFLOP/s or None, note): each product's best rate."""
    return [(fmt, runtime, None if run is None else best_rate(run), note) for fmt, runtime, run, note in products()]


def best_by_format(rows: list[tuple[str, str, float | None, str]]) -> dict[str, float]:
    """The highest measured rate per format (a bf16 row that ran float32 does not count as bf16)."""
    out: dict[str, float] = {}
    for fmt, _, rate, note in rows:
        if rate is not None and not (fmt == "bf16" and note):
            out[fmt] = max(out.get(fmt, 0.0), rate)
    return out


if __name__ == "__main__":
    for fmt, runtime, rate, note in peaks():
        print(f"{fmt:5} {runtime:34} {'-' if rate is None else f'{rate:8.0f} GFLOP/s'} {note}")
