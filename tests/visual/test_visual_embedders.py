"""The visual embedder seam: the tiny model passes the conformance suite, the factory's names and
errors, the ColPali embedder's errors here (no weights, no PyTorch), and the shared MaxSim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from ragspine.extras import MissingExtraError
from ragspine.retrieval.vector.late_interaction import maxsim, maxsim_packed
from ragspine.retrieval.visual.factory import VISUAL_EMBEDDERS, make_visual_embedder
from ragspine.retrieval.visual.tiny import TinyVisualEmbedder
from ragspine.settings import config
from ragspine.testing.visual_embedder import VisualEmbedderSuite


class TestTinyVisualEmbedder(VisualEmbedderSuite):
    @pytest.fixture
    def embedder(self) -> Any:
        return make_visual_embedder("tiny")


class TestTinyOtherShape(VisualEmbedderSuite):
    @pytest.fixture
    def embedder(self) -> Any:
        return TinyVisualEmbedder(dim=16, grid=4, patch=3, seed=9)


def test_settings_list_the_registry_names() -> None:
    assert tuple(VISUAL_EMBEDDERS.names) == config.VISUAL_EMBEDDERS


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="valid: none, colpali, colqwen2, tiny, or a dotted path"):
        make_visual_embedder("colpaly")


def test_a_dotted_path_is_built_and_checked_against_the_protocol() -> None:
    built = make_visual_embedder("ragspine.retrieval.visual.tiny:TinyVisualEmbedder", seed=4)
    assert built is not None and built.model_id.endswith("seed=4")
    with pytest.raises(TypeError, match="does not implement the VisualEmbedder protocol"):
        make_visual_embedder("collections:OrderedDict")


def test_the_seed_changes_the_weights() -> None:
    page = np.full((50, 40, 3), 128, dtype=np.uint8)
    a, b = TinyVisualEmbedder(seed=0), TinyVisualEmbedder(seed=1)
    assert not np.allclose(a.embed_pages([page])[0], b.embed_pages([page])[0])
    assert a.model_id != b.model_id


def test_colpali_needs_a_model_folder(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no model folder at .*RAGSPINE_VISUAL_MODEL"):
        make_visual_embedder("colqwen2", model_dir=tmp_path / "missing")
    with pytest.raises(ValueError, match="needs the option"):
        make_visual_embedder("colpali")


def test_colpali_without_its_extra_names_it(tmp_path: Path) -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("PyTorch is installed here: the missing-extra error cannot be shown")
    with pytest.raises(MissingExtraError, match=r"pip install 'ragspine\[colpali\]'"):
        make_visual_embedder("colpali", model_dir=tmp_path)


def test_colpali_is_not_imported_until_built() -> None:
    import subprocess
    import sys

    code = ("import sys, ragspine.assembly, ragspine.retrieval.visual.factory; "
            "print(any(m in sys.modules for m in ('torch', 'colpali_engine', 'transformers', 'pypdfium2')))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


docs_strategy = st.lists(st.integers(0, 5), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(counts=docs_strategy, seed=st.integers(0, 2**16), qlen=st.integers(0, 4))
def test_packed_maxsim_equals_maxsim_per_document(counts: list[int], seed: int, qlen: int) -> None:
    rng = np.random.default_rng(seed)
    docs = [rng.standard_normal((n, 8)).astype(np.float32) for n in counts]
    query = rng.standard_normal((qlen, 8)).astype(np.float32)
    rows = np.concatenate(docs) if sum(counts) else np.zeros((0, 8), dtype=np.float32)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    packed = maxsim_packed(query, rows, offsets)
    assert np.allclose(packed, [maxsim(query, d) if len(d) else 0.0 for d in docs], atol=1e-4)
    assert np.allclose(maxsim_packed(query, rows.astype(np.float16), offsets),
                       [maxsim(query, d.astype(np.float16)) if len(d) else 0.0 for d in docs], atol=1e-3)  # fmt: skip


@given(hnp.arrays(np.int64, st.integers(2, 5), elements=st.integers(-3, 3)))
def test_packed_maxsim_refuses_bad_offsets(offsets: np.ndarray) -> None:
    rows = np.ones((3, 2), dtype=np.float32)
    good = offsets[0] == 0 and offsets[-1] == 3 and bool(np.all(np.diff(offsets) >= 0))
    if good:
        assert len(maxsim_packed(np.ones((1, 2)), rows, offsets)) == len(offsets) - 1
    else:
        with pytest.raises(ValueError, match="offsets must run from 0"):
            maxsim_packed(np.ones((1, 2)), rows, offsets)
