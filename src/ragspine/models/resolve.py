"""The one model resolver: what every model-backed slot (cross-encoder, ColBERT, SPLADE, the
ONNX embedder, the visual embedders) calls to turn what the user named into files on disk.

A model is named by a local folder, or a hub id with an optional pinned revision
(`ORG/NAME`, `ORG/NAME@REVISION`, `hub:ORG/NAME`); the packaged models stay each slot's own
default. Invariants: an existing folder always wins over a hub id of the same spelling; a hub
model is looked up in the cache first, so a pulled model never touches the network again; it is
fetched on first use unless HF_HUB_OFFLINE is set or `pull=False`, and then the error is the one
line naming `ragspine models pull NAME`. The files a slot needs are checked before the folder is
returned: for an ONNX slot the graph (`pick_onnx`: int8 where the repo offers it, else fp32;
`onnx/` exports such as Xenova's included) and tokenizer.json. A hub repo's int8 graph with a
float graph beside it is fetched with that float graph and used only when it passes the parity
check (`ragspine.models.parity`); otherwise the float graph is used, with a log line.
"""

from __future__ import annotations

import logging
import platform
from dataclasses import dataclass
from pathlib import Path

from ragspine.models.known import ST_FILES
from ragspine.models.parity import checked_int8
from ragspine.models.hub import (
    HubRef, ModelNotPulled, cached_snapshot, download, hub_endpoint, hub_offline, not_pulled, parse_hub_ref,
    repo_files,
)  # fmt: skip

log = logging.getLogger(__name__)

# The ONNX graphs a repo may ship, best first: int8 exports (Transformers.js' `model_quantized` /
# `model_int8`, sentence-transformers' `model_qint8_<cpu>` for this machine's CPU), then fp32.
# fp16 / q4 / bnb4 / O1-O4 variants are never picked (slow or unsupported on a CPU).
_CPU_INT8 = (
    ("onnx/model_qint8_arm64.onnx",) if platform.machine().lower() in ("arm64", "aarch64")
    else ("onnx/model_qint8_avx512.onnx", "onnx/model_quint8_avx2.onnx")
)  # fmt: skip
ONNX_PREFERENCE = (
    "onnx/model_int8.onnx", "onnx/model_quantized.onnx", *_CPU_INT8, "model_int8.onnx", "model_quantized.onnx",
    "model.onnx", "onnx/model.onnx",
)  # fmt: skip
FLOAT_GRAPHS = ("model.onnx", "onnx/model.onnx")
INT8_GRAPHS = tuple(name for name in ONNX_PREFERENCE if name not in FLOAT_GRAPHS)
# int8=False: fp32 first (an embedder keeps the graph its vectors were made with), int8 if that is all.
ONNX_FP32 = ("model.onnx", "onnx/model.onnx", "onnx/model_quantized.onnx", "model_quantized.onnx")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json")
SLOTS = ("onnx", "splade", "visual")
_SPLADE_FILES = ("config.json", "model.safetensors", "tokenizer.json")
_VISUAL_PATTERNS = ("*.json", "*.safetensors", "*.model", "*.txt")


@dataclass(frozen=True)
class ResolvedModel:
    """Where a named model is: its folder, the ONNX graph an ONNX slot runs, and what was named."""

    name: str
    folder: Path
    onnx: Path | None = None
    source: str = "folder"  # folder | hub

    @property
    def tokenizer(self) -> Path:
        return self.folder / "tokenizer.json"


def pick_onnx(files: list[str], *, int8: bool = True) -> str | None:
    """The ONNX graph to run among a repo's or folder's `files` (relative paths), or None.

    >>> pick_onnx(["onnx/model.onnx", "onnx/model_fp16.onnx", "onnx/model_quantized.onnx", "tokenizer.json"])
    'onnx/model_quantized.onnx'
    >>> pick_onnx(["model.onnx", "onnx/model_quantized.onnx"], int8=False), pick_onnx(["README.md"])
    ('model.onnx', None)
    """
    present = set(files)
    return next((name for name in (ONNX_PREFERENCE if int8 else ONNX_FP32) if name in present), None)


def slot_files(files: list[str], slot: str, *, int8: bool = True) -> list[str]:
    """The files of `files` a slot fetches; an ONNX graph's external data (`.onnx_data`) with it."""
    if slot == "onnx":
        graph = pick_onnx(files, int8=int8)
        wanted = [f for f in (*TOKENIZER_FILES, *ST_FILES) if f in files]
        graphs = [graph, float_beside(files, graph)] if graph else []
        for name in filter(None, graphs):  # an int8 graph brings the float one for its parity check
            wanted += [f for f in files if f == name or f.startswith((name + "_data", name + ".data"))]
        return wanted
    if slot == "splade":
        return [f for f in _SPLADE_FILES if f in files]
    return [f for f in files if "/" not in f and any(Path(f).match(p) for p in _VISUAL_PATTERNS)]


def float_beside(files: list[str], graph: str) -> str | None:
    """The float graph a repo ships beside `graph` when `graph` is an int8 one, else None.

    >>> float_beside(["onnx/model.onnx", "onnx/model_quantized.onnx"], "onnx/model_quantized.onnx")
    'onnx/model.onnx'
    >>> float_beside(["model.onnx"], "model.onnx"), float_beside(["onnx/model_int8.onnx"], "onnx/model_int8.onnx")
    (None, None)
    """
    if graph not in INT8_GRAPHS:
        return None
    return next((name for name in FLOAT_GRAPHS if name in files), None)


def int8_pair(folder: Path, graph: str | None = None) -> tuple[str, str] | None:
    """(int8 graph, float graph beside it) in a model `folder`, relative to it: `graph`, else the
    first of `INT8_GRAPHS` there; None when there is no such pair (what the parity check compares)."""
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.onnx"))
    graph = graph if graph is not None else next((g for g in INT8_GRAPHS if g in files), None)
    fp32 = float_beside(files, graph) if graph is not None else None
    return (graph, fp32) if graph is not None and fp32 is not None else None


def with_parity(model: ResolvedModel) -> ResolvedModel:
    """A hub model whose int8 graph has a float graph beside it: the int8 graph when it passes
    the parity check (`ragspine.models.parity`), else the float graph (logged)."""
    if model.onnx is None:
        return model
    pair = int8_pair(model.folder, str(model.onnx.relative_to(model.folder)))
    if pair is None:
        return model
    fp32 = pair[1]
    repo = model.folder.parent.parent  # models--ORG--NAME/snapshots/COMMIT
    try:
        ok = checked_int8(repo, model.onnx, model.folder / fp32, model.tokenizer, name=model.name).ok
    except ImportError:
        raise
    except Exception as exc:  # the graphs could not be run on the probes (ONNX Runtime's errors)
        log.warning("%s: the int8 parity check could not run (%s: %s); the float graph is used",
                    model.name, type(exc).__name__, exc)  # fmt: skip
        ok = False
    return model if ok else ResolvedModel(model.name, model.folder, model.folder / fp32, model.source)


def check_slot(folder: Path, slot: str, *, what: str, name: str, int8: bool = True) -> ResolvedModel:
    """A ResolvedModel for `folder`, or FileNotFoundError naming what the slot misses there."""
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    if slot == "onnx":
        graph = pick_onnx(files, int8=int8)
        for file, ok in (("model.onnx", graph), ("tokenizer.json", "tokenizer.json" in files)):
            if not ok:
                raise FileNotFoundError(f"{what}: {file} is missing from the model folder {str(folder)!r}")
        assert graph is not None
        return ResolvedModel(name, folder, folder / graph)
    needed = _SPLADE_FILES if slot == "splade" else ("config.json",)
    missing = [n for n in needed if n not in files]
    if missing:
        raise FileNotFoundError(f"{what}: {', '.join(missing)} missing from the model folder {str(folder)!r}")
    return ResolvedModel(name, folder)


def resolve_model(
    spec: str | Path, *, slot: str, what: str, setting: str, pull: bool = True, int8: bool = True
) -> ResolvedModel:
    """The model `spec` names, as files on disk, checked for `slot` ("onnx", "splade", "visual").

    `what` and `setting` name the component and the setting in errors. A folder that is not
    there and is no hub id is FileNotFoundError; a hub model not cached and not fetchable now is
    `ModelNotPulled` (one line naming `ragspine models pull`)."""
    if slot not in SLOTS:
        raise ValueError(f"unknown model slot {slot!r}; valid: {', '.join(SLOTS)}")
    text = str(spec)
    folder = Path(text).expanduser()
    ref = None if folder.is_dir() else parse_hub_ref(text)
    if ref is None:
        if not folder.is_dir():
            raise FileNotFoundError(
                f"{what}: model folder {text!r} ({setting}) is not a folder (nor a hub id ORG/NAME[@REVISION])"
            )
        return check_slot(folder, slot, what=what, name=text, int8=int8)
    snapshot = cached_snapshot(ref)
    if snapshot is not None:
        try:
            return _hub_model(check_slot(snapshot, slot, what=what, name=ref.name, int8=int8))
        except FileNotFoundError:
            pass  # a partial snapshot (another slot's files, an interrupted pull): fetch what is missing
    if not pull:
        raise not_pulled(ref, what=what, setting=setting, why="fetching on first use is off")
    if hub_offline():
        raise not_pulled(ref, what=what, setting=setting, why="the hub is offline (HF_HUB_OFFLINE)")
    return _hub_model(check_slot(pull_model(ref, slot, what=what, setting=setting, int8=int8), slot,
                                 what=what, name=ref.name, int8=int8))  # fmt: skip


def pull_model(ref: HubRef, slot: str, *, what: str, setting: str, int8: bool = True) -> Path:
    """Fetch the files `slot` needs from `ref` into the cache; the snapshot folder."""
    try:
        files = repo_files(ref)
    except (ModelNotPulled, ImportError):
        raise
    except Exception as exc:  # the hub client's connection, HTTP and not-found errors
        kind = type(exc).__name__
        if kind == "GatedRepoError":
            raise PermissionError(
                f"{what}: {ref.name!r} ({setting}) is gated on the hub: accept its terms there and log in "
                "(HF_TOKEN or `hf auth login`)"
            ) from exc
        if kind in ("RepositoryNotFoundError", "RevisionNotFoundError"):
            raise FileNotFoundError(
                f"{what}: the hub at {hub_endpoint()} has no model {ref.name!r} ({setting}), and there is no "
                f"folder of that name here: {kind}"
            ) from exc
        why = f"the hub at {hub_endpoint()} cannot be reached ({kind})"
        raise not_pulled(ref, what=what, setting=setting, why=why) from exc
    wanted = slot_files(files, slot, int8=int8)
    if not wanted:
        raise FileNotFoundError(
            f"{what}: the hub model {ref.name!r} ({setting}) has none of the files a {slot} model needs "
            "(an ONNX export with tokenizer.json for ONNX slots)"
        )
    return download(ref, wanted)


def _hub_model(model: ResolvedModel) -> ResolvedModel:
    return with_parity(ResolvedModel(model.name, model.folder, model.onnx, "hub"))
