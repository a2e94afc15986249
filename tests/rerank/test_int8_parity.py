"""int8 parity against the loopback hub (conftest's `hub`): a repo shipping an int8 graph beside
its float graph is pulled with both; an int8 graph that matches the float one (ONNX Runtime's own
dynamic quantisation of the tiny cross-encoder) is used, one that does not (other weights) is
replaced by the float graph with a log line; the result is kept and `ragspine models verify`
runs the check again."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from local_hub import LocalHub
from rerank_models import cross_encoder_folder

pytest.importorskip("onnxruntime")
pytest.importorskip("huggingface_hub")

from ragspine.models import parity as parity_module  # noqa: E402
from ragspine.models import resolve_model  # noqa: E402
from ragspine.models.parity import PARITY_MIN_COSINE, RECORD  # noqa: E402
from ragspine.retrieval.rerank.cross_encoder import make_reranker  # noqa: E402

QUERY = "why did revenue fall"
PASSAGES = ["the weather was sunny all week", "revenue fell because overseas demand weakened"]


def _export(tmp_path: Path, name: str, *, matching: bool) -> Path:
    """A Transformers.js-style repo folder: onnx/model.onnx (float) + onnx/model_quantized.onnx."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    built = cross_encoder_folder(tmp_path / "built" / name)
    (built / "onnx").mkdir()
    shutil.move(built / "model.onnx", built / "onnx" / "model.onnx")
    if matching:  # a real int8 graph: the embedding table quantised (QInt8 + DequantizeLinear)
        quantize_dynamic(str(built / "onnx" / "model.onnx"), str(built / "onnx" / "model_quantized.onnx"),
                         weight_type=QuantType.QInt8, op_types_to_quantize=["Gather"])  # fmt: skip
    else:  # a broken export: the weights of other words
        other = cross_encoder_folder(tmp_path / "built" / f"{name}-other", weights={"the": 3.0, "weather": 2.0,
                                                                                     "sunny": 1.0})  # fmt: skip
        shutil.copy(other / "model.onnx", built / "onnx" / "model_quantized.onnx")
    return built


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_matching_int8_graph_is_used(hub: LocalHub, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    hub.add("me/good-int8", _export(tmp_path, "good", matching=True))
    caplog.set_level(logging.WARNING, logger="ragspine.models.parity")
    model = resolve_model("me/good-int8", slot="onnx", what="test", setting="X")
    assert model.onnx is not None and model.onnx.name == "model_quantized.onnx"
    assert (model.folder / "onnx" / "model.onnx").is_file(), "the float graph came with it, for the check"
    kept = (model.folder.parent.parent / RECORD).read_text("utf-8")
    assert '"ok": true' in kept
    assert not [r for r in caplog.records if r.name.startswith("ragspine")]
    assert make_reranker("ce", model_dir="me/good-int8").rerank(QUERY, PASSAGES) == [1, 0]


def test_a_mismatching_int8_graph_falls_back_to_the_float_graph_with_a_log_line(
    hub: LocalHub, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add("me/bad-int8", _export(tmp_path, "bad", matching=False))
    caplog.set_level(logging.WARNING, logger="ragspine.models.parity")
    reranker = make_reranker("ce", model_dir="me/bad-int8")
    assert reranker.rerank(QUERY, PASSAGES) == [1, 0], "the float graph ranks (the int8 one would not)"
    assert reranker._model.model_path.name == "model.onnx"
    (line,) = [r.getMessage() for r in caplog.records if r.name.startswith("ragspine")]
    assert line.startswith("me/bad-int8: the int8 graph model_quantized.onnx failed the parity check (lowest cosine")
    assert f"< {PARITY_MIN_COSINE:.2f} on 4 fixed probes); the float graph is used" in line

    def no_second_run(*args: object) -> None:
        raise AssertionError("the kept result is read, not computed again")

    monkeypatch.setattr(parity_module, "graph_parity", no_second_run)
    again = resolve_model("me/bad-int8", slot="onnx", what="test", setting="X")
    assert again.onnx is not None and again.onnx.name == "model.onnx"


def test_verify_runs_the_check_again(hub: LocalHub, tmp_path: Path) -> None:
    from ragspine.cli import main

    hub.add("me/good-int8", _export(tmp_path, "good", matching=True))
    hub.add("me/bad-int8", _export(tmp_path, "bad", matching=False))
    runner = CliRunner()
    for name in ("me/good-int8", "me/bad-int8"):
        assert runner.invoke(main, ["models", "pull", name, "--slot", "onnx"]).exit_code == 0
    verified = runner.invoke(main, ["models", "verify"])
    assert verified.exit_code == 0, verified.output
    good, bad = (next(line for line in verified.output.splitlines() if line.startswith(n)) for n in
                 ("me/good-int8", "me/bad-int8"))  # fmt: skip
    assert "int8 parity onnx/model_quantized.onnx vs onnx/model.onnx: cosine 1.0000 ok" in good
    assert f"below {PARITY_MIN_COSINE}: the float graph onnx/model.onnx is used" in bad


def test_a_repo_with_one_graph_runs_no_check(hub: LocalHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object) -> None:
        raise AssertionError("no pair, no check")

    monkeypatch.setattr(parity_module, "graph_parity", never)
    model = resolve_model("cross-encoder/ms-marco-MiniLM-L6-v2", slot="onnx", what="test", setting="X")
    assert model.onnx is not None and model.onnx.name == "model.onnx"


def test_an_int8_graph_that_cannot_run_falls_back_too(
    hub: LocalHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    built = _export(tmp_path, "broken", matching=True)
    (built / "onnx" / "model_quantized.onnx").write_bytes(b"not an ONNX graph")
    hub.add("me/broken-int8", built)
    caplog.set_level(logging.WARNING, logger="ragspine.models.resolve")
    model = resolve_model("me/broken-int8", slot="onnx", what="test", setting="X")
    assert model.onnx is not None and model.onnx.name == "model.onnx"
    (line,) = [r.getMessage() for r in caplog.records if r.name == "ragspine.models.resolve"]
    assert line.startswith("me/broken-int8: the int8 parity check could not run (") and "the float graph is used" in line


def test_a_kept_result_is_keyed_by_the_tokenizer_and_probe_set_and_judged_on_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept verdict names the two graphs, the tokenizer and the probe set: another tokenizer
    blob or a new probe set runs the check again; `ok` is the kept cosine against today's
    threshold, whatever `ok` the file says."""
    from ragspine.models.parity import Parity, record, recorded

    int8, fp32, tok, other_tok = (tmp_path / n for n in ("int8.onnx", "fp32.onnx", "tok-a.json", "tok-b.json"))
    for path in (int8, fp32, tok, other_tok):
        path.write_text(path.name)
    record(tmp_path, int8, fp32, tok, Parity(0.995, True))
    assert recorded(tmp_path, int8, fp32, tok) == Parity(0.995, True)
    assert recorded(tmp_path, int8, fp32, other_tok) is None, "another tokenizer: checked again"
    monkeypatch.setattr(parity_module, "PARITY_MIN_COSINE", 0.999)
    assert recorded(tmp_path, int8, fp32, tok) == Parity(0.995, False), "judged against today's threshold"
    monkeypatch.setattr(parity_module, "PROBES_VERSION", parity_module.PROBES_VERSION + 1)
    assert recorded(tmp_path, int8, fp32, tok) is None, "another probe set: checked again"
