"""`ColPaliEmbedder`: ColPali or ColQwen2 page and query vectors through colpali-engine (the
`[colpali]` extra: colpali-engine, transformers, PyTorch), weights from a folder or a hub id.

Invariants: the weights are a folder, or a hub id resolved by `ragspine.models.resolve_model`
(fetched once into the hub cache after the extra's imports succeed; loading itself is
`local_files_only=True`); a path that is neither is a ValueError before any import; torch and
colpali-engine are imported when the first embedder is built, so a bare install never imports
them, and their absence is a MissingExtraError naming `[colpali]`; only the vectors of real positions (attention mask 1) are kept, each L2-normalised
(the models' own projections are already unit length; normalising again only removes rounding);
`device` is `cpu`, `cuda`, `cuda:N` or `auto` (cuda when PyTorch sees one, else the CPU with one
log line; `ragspine.models.device.torch_device`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.extras import require
from ragspine.models import parse_hub_ref, resolve_model
from ragspine.models.device import torch_device
from ragspine.retrieval.vector.arrays import unit_rows

# family → (model class, processor class) in colpali_engine.models
FAMILIES = {"colpali": ("ColPali", "ColPaliProcessor"), "colqwen2": ("ColQwen2", "ColQwen2Processor")}
DEFAULT_BATCH_SIZE = 4


class ColPaliEmbedder:
    """Page-image late interaction with a local ColPali / ColQwen2 checkpoint.

    >>> embedder = ColPaliEmbedder("models/colqwen2-v1.0", family="colqwen2", device="cuda")  # doctest: +SKIP
    >>> embedder.embed_queries(["营收为什么下滑"])[0].shape  # doctest: +SKIP
    (12, 128)
    """

    def __init__(
        self,
        model_dir: str | Path,
        *,
        family: str = "colpali",
        device: str = "auto",
        batch_size: int = DEFAULT_BATCH_SIZE,
        dtype: str = "auto",
    ) -> None:
        if family not in FAMILIES:
            raise ValueError(f"unknown visual model family {family!r}; valid: {', '.join(FAMILIES)}")
        folder = Path(model_dir).expanduser()
        ref = None if folder.is_dir() else parse_hub_ref(str(model_dir))
        if ref is None and not folder.is_dir():
            raise ValueError(
                f"{family}: no model folder at {folder}; name a folder or a hub id (e.g. "
                "vidore/colqwen2-v1.0) in RAGSPINE_VISUAL_MODEL"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.torch = require("torch", extra="colpali", purpose=f"RAGSPINE_VISUAL_EMBEDDER={family}")
        models = require("colpali_engine.models", extra="colpali", purpose=f"RAGSPINE_VISUAL_EMBEDDER={family}")
        if ref is not None:  # fetched once into the hub cache (the extras are checked first)
            folder = resolve_model(ref.name, slot="visual", what=family, setting="RAGSPINE_VISUAL_MODEL").folder
        self.device = torch_device(self.torch, device)
        torch_dtype = _dtype(self.torch, dtype, self.device)
        model_cls, processor_cls = (getattr(models, name) for name in FAMILIES[family])
        self.model = model_cls.from_pretrained(
            str(folder), torch_dtype=torch_dtype, device_map=self.device, local_files_only=True
        ).eval()
        self.processor = processor_cls.from_pretrained(str(folder), local_files_only=True)
        self.family, self.folder, self.batch_size = family, folder, batch_size
        self.dim = int(getattr(self.model, "dim", 128))
        self.model_id = f"{family}:{ref.repo_id}@{folder.name[:12]}" if ref else f"{family}:{folder.name}"

    def embed_pages(self, images: Sequence[np.ndarray]) -> list[np.ndarray]:
        image_mod = require("PIL.Image", extra="colpali", purpose="ColPali page images")
        pil = [image_mod.fromarray(np.asarray(image, dtype=np.uint8), mode="RGB") for image in images]
        return self._run(pil, self.processor.process_images)

    def embed_queries(self, queries: Sequence[str]) -> list[np.ndarray]:
        return self._run(list(queries), self.processor.process_queries)

    def _run(self, items: list[Any], process: Any) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for start in range(0, len(items), self.batch_size):
            batch = process(items[start : start + self.batch_size]).to(self.model.device)
            with self.torch.no_grad():
                vectors = self.model(**batch)
            mask = batch["attention_mask"].bool().cpu().numpy()
            hidden = vectors.float().cpu().numpy()
            out.extend(unit_rows(hidden[i][mask[i]]) for i in range(len(hidden)))
        return out

    def __repr__(self) -> str:
        return f"ColPaliEmbedder({str(self.folder)!r}, family={self.family!r}, device={self.device!r})"


def _dtype(torch: Any, dtype: str, device: str) -> Any:
    """bfloat16 on a GPU, float32 on the CPU (where bfloat16 matmuls are slow), unless given."""
    if dtype == "auto":
        return torch.bfloat16 if device != "cpu" else torch.float32
    found = getattr(torch, dtype, None)
    if found is None:
        raise ValueError(f"unknown torch dtype {dtype!r}; e.g. float32, bfloat16, float16")
    return found
