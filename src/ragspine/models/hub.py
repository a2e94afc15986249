"""The Hugging Face Hub side of the model resolver: where models are cached, whether the hub may
be reached, fetching a model's files, and checking them.

Invariants: `huggingface_hub` does the fetching (its cache layout, resume of `.incomplete`
blobs, token from HF_TOKEN or `hf auth login`, progress bars), imported only when a hub model
is asked for (the `[hub]` extra). HF_ENDPOINT, HF_HUB_CACHE / HF_HOME and HF_HUB_OFFLINE are
read when called, not at import. A token is never printed. Every fetched file is checked
against the name the hub gave its blob (sha256 for LFS files, the git blob sha1 otherwise):
a mismatch deletes the file and is a `DamagedFile`. A model that is not cached while the hub is
offline is a `ModelNotPulled` whose one line names `ragspine models pull NAME`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ragspine.errors import DamagedFile, RagspineError
from ragspine.extras import require

HUB_EXTRA = "hub"
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ModelNotPulled(RagspineError, ValueError):
    """A hub model is not in the cache and cannot be fetched now; the message names the pull."""


@dataclass(frozen=True)
class HubRef:
    """A hub model: `repo_id` and an optional pinned `revision` (a branch, tag or commit)."""

    repo_id: str
    revision: str | None = None

    @property
    def name(self) -> str:
        return f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id


def hub_spelling(spec: str) -> str | None:
    """The ORG/NAME[@REV] of a `hub:` spelling (the prefix in any case, `spec` stripped), or
    None when `spec` does not start with it: the one reading of the prefix (settings, factory).

    >>> hub_spelling(" HUB:BAAI/bge-m3 "), hub_spelling("BAAI/bge-m3")
    ('BAAI/bge-m3', None)
    """
    text = spec.strip()
    return text[4:] if text[:4].lower() == "hub:" else None


def parse_hub_ref(spec: str) -> HubRef | None:
    """`hub:ORG/NAME@REV`, `ORG/NAME@REV` or `ORG/NAME` → a HubRef; anything else → None.

    >>> parse_hub_ref("cross-encoder/ms-marco-MiniLM-L6-v2@main")
    HubRef(repo_id='cross-encoder/ms-marco-MiniLM-L6-v2', revision='main')
    >>> parse_hub_ref("HUB:BAAI/bge-m3").name, parse_hub_ref("./models/x"), parse_hub_ref("a/b/c")
    ('BAAI/bge-m3', None, None)
    """
    model = hub_spelling(spec)
    text = spec if model is None else model
    repo, _, revision = text.partition("@")
    if not _REPO.fullmatch(repo) or repo.startswith(".") or (revision == "" and text.endswith("@")):
        return None
    return HubRef(repo, revision or None)


def hub_cache() -> Path:
    """The hub cache folder: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def hub_endpoint() -> str:
    """HF_ENDPOINT, else the public hub."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_offline() -> bool:
    """HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set to a true value."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in ("1", "on", "yes", "true")


def repo_folder(ref: HubRef, cache: Path | None = None) -> Path:
    """The repository's folder in the cache (`models--ORG--NAME`)."""
    return (cache or hub_cache()) / ("models--" + ref.repo_id.replace("/", "--"))


def cached_snapshot(ref: HubRef, cache: Path | None = None) -> Path | None:
    """The cached snapshot folder of `ref`'s revision (a commit, or a branch/tag via refs/), or None."""
    folder = repo_folder(ref, cache)
    revision = ref.revision or "main"
    commit = revision if _COMMIT.fullmatch(revision) else None
    ref_file = folder / "refs" / revision
    if commit is None and ref_file.is_file():
        commit = ref_file.read_text("utf-8").strip()
    snapshot = folder / "snapshots" / commit if commit else None
    return snapshot if snapshot is not None and snapshot.is_dir() else None


def not_pulled(ref: HubRef, *, what: str, setting: str, why: str) -> ModelNotPulled:
    """The one-line error for a hub model that is not cached and cannot be fetched now."""
    return ModelNotPulled(
        f"{what}: model {ref.name!r} ({setting}) is not in the model cache {str(hub_cache())!r} and {why}: "
        f"run `ragspine models pull {ref.name}` where the hub can be reached, or set {setting} to a local folder"
    )


def repo_files(ref: HubRef) -> list[str]:
    """The files of `ref`'s revision on the hub (one metadata request)."""
    hub = require("huggingface_hub", extra=HUB_EXTRA, purpose=f"the hub model {ref.name!r}")
    info = hub.HfApi(endpoint=hub_endpoint()).model_info(ref.repo_id, revision=ref.revision)
    return [s.rfilename for s in info.siblings or []]


def download(ref: HubRef, files: list[str]) -> Path:
    """Fetch `files` of `ref` into the cache (resuming partial blobs), check them, and return the
    snapshot folder."""
    hub = require("huggingface_hub", extra=HUB_EXTRA, purpose=f"the hub model {ref.name!r}")
    folder = Path(hub.snapshot_download(
        ref.repo_id, revision=ref.revision, cache_dir=str(hub_cache()), endpoint=hub_endpoint(),
        allow_patterns=files,
    ))  # fmt: skip
    bad = [str(p.relative_to(folder)) for p in snapshot_files(folder) if not blob_ok(p, delete=True)]
    if bad:
        raise DamagedFile(
            f"{ref.name}: {', '.join(bad)} did not match the hub's checksum and was deleted; "
            f"run `ragspine models pull {ref.name}` again"
        )
    return folder


def snapshot_files(folder: Path) -> list[Path]:
    """The files of a snapshot folder (links into blobs/), sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file())


def blob_ok(path: Path, *, delete: bool = False) -> bool:
    """Whether a cached file's content matches the name of its blob (sha256 or git blob sha1);
    True for a file whose blob name is no checksum. `delete`: remove a mismatching blob and link."""
    blob = path.resolve()
    expected = blob.name
    if _SHA256.fullmatch(expected):
        actual = file_digest(blob, "sha256")
    elif _COMMIT.fullmatch(expected):  # a git blob id: sha1 of "blob SIZE\0" + the bytes
        actual = file_digest(blob, "sha1", prefix=f"blob {blob.stat().st_size}\0".encode())
    else:
        return True
    if actual != expected and delete:
        blob.unlink(missing_ok=True)
        path.unlink(missing_ok=True)
    return actual == expected


def file_digest(path: Path, algorithm: str, *, prefix: bytes = b"") -> str:
    """The hex digest of `prefix` + the file's bytes."""
    digest = hashlib.new(algorithm, prefix)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class CachedModel:
    """One model repository in the cache: its name, folder, size on disk and revisions."""

    repo_id: str
    folder: Path
    size: int
    revisions: tuple[str, ...]


def cached_models(cache: Path | None = None) -> list[CachedModel]:
    """Every model repository in the cache, by name."""
    root = cache or hub_cache()
    out = []
    for folder in sorted(root.glob("models--*")):
        blobs = folder / "blobs"
        size = sum(p.stat().st_size for p in blobs.iterdir() if p.is_file()) if blobs.is_dir() else 0
        snapshots = folder / "snapshots"
        revisions = tuple(sorted(p.name for p in snapshots.iterdir())) if snapshots.is_dir() else ()
        out.append(CachedModel(folder.name.removeprefix("models--").replace("--", "/"), folder, size, revisions))
    return out


def remove_model(ref: HubRef, cache: Path | None = None) -> int:
    """Delete a model repository from the cache; the bytes freed (0 when it was not there)."""
    folder = repo_folder(ref, cache)
    if not folder.is_dir():
        return 0
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    shutil.rmtree(folder)
    return size
