"""`ragspine embed`: throughput and ETA on stderr, `--threads N` for the encoder and numpy's BLAS.
Real SQLite stores; the deterministic backend (hashed tokens) stands in for e5."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from click.testing import CliRunner

from ragspine.assembly import THREADED_EMBEDDINGS, TORCH_EMBEDDINGS, embedding_options, load_settings
from ragspine.cli import _blas_threads, main
from ragspine.retrieval.vector.embeddings.factory import EMBEDDING_BACKENDS
from ragspine.settings import choices


def _corpus(root: Path, n: int) -> Path:
    root.mkdir()
    for i in range(n):
        (root / f"d{i}.txt").write_text(f"Document {i} says the margin fell {i} points.", "utf-8")
    return root


def test_embed_reports_throughput_and_eta_off_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = str(tmp_path / "s.db")
    assert CliRunner().invoke(main, ["ingest", str(_corpus(tmp_path / "docs", 12)), "--db", db]).exit_code == 0
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")
    result = CliRunner().invoke(main, ["embed", "--db", db, "--batch-size", "3", "--threads", "1"])
    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("embed: ")]
    assert len(lines) == 4, result.stderr  # one per batch of 3: each passes another 10%
    assert lines[-1].startswith("embed: 12/12 chunks (100%)")
    assert all("chunks/s" in line and "ETA" in line for line in lines)
    assert result.stdout.startswith("embedded 12 chunk(s)")


def test_threads_reach_the_encoder_options_and_the_blas_pool() -> None:
    settings = load_settings({"RAGSPINE_EMBEDDING": "e5", "RAGSPINE_EMBED_THREADS": "1"})
    assert embedding_options(settings, "e5")["threads"] == 1
    assert "threads" not in embedding_options(load_settings({"RAGSPINE_EMBEDDING": "e5"}), "e5")
    for name in THREADED_EMBEDDINGS:  # every backend given `threads` takes it
        assert "threads" in inspect.signature(EMBEDDING_BACKENDS[name].options_of).parameters, name  # type: ignore[arg-type]
    for name in TORCH_EMBEDDINGS:  # every backend given `device` takes it
        assert "device" in inspect.signature(EMBEDDING_BACKENDS[name].options_of).parameters, name  # type: ignore[arg-type]
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import numpy  # noqa: F401  (its BLAS is what the limit reaches)

    with _blas_threads(1):
        pools = threadpoolctl.threadpool_info()
        assert pools and all(pool["num_threads"] == 1 for pool in pools)


def test_the_embedding_backend_groups_are_declared_once() -> None:
    """assembly and model_slots use settings.choices' lists themselves, not copies of them."""
    from ragspine import assembly, model_slots

    assert assembly.THREADED_EMBEDDINGS is choices.THREADED_EMBEDDINGS
    assert assembly.TORCH_EMBEDDINGS is model_slots.TORCH_EMBEDDINGS is choices.TORCH_EMBEDDINGS
    assert model_slots.ONNX_EMBEDDINGS is choices.ONNX_EMBEDDINGS and model_slots.E5_EMBEDDINGS is choices.E5_EMBEDDINGS
    assert choices.THREADED_EMBEDDINGS == choices.E5_EMBEDDINGS | choices.ONNX_EMBEDDINGS
    assert choices.LOCAL_MODEL_PATH == choices.ONNX_EMBEDDINGS | choices.TORCH_EMBEDDINGS
    for name in choices.E5_EMBEDDINGS | choices.ONNX_EMBEDDINGS | choices.TORCH_EMBEDDINGS:
        assert name in EMBEDDING_BACKENDS, name
