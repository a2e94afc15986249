"""A loopback Hugging Face Hub for the model tests: a real HTTP server (http.server in a thread)
answering the routes `huggingface_hub` calls, pointed to by HF_ENDPOINT.

- GET  /api/models/ORG/NAME/revision/REV   → id, sha, siblings (`model_info`, `snapshot_download`)
- GET  /api/models/ORG/NAME/tree/REV        → the file listing (`list_repo_tree`)
- HEAD /ORG/NAME/resolve/REV/PATH           → X-Repo-Commit, ETag (X-Linked-Etag for LFS), size
- GET  /ORG/NAME/resolve/REV/PATH           → the bytes; a `Range: bytes=N-` request gets 206

`.onnx` files are served as LFS files (etag = sha256), the others as git files (etag = the git
blob sha1), as the hub does. `corrupt` names files whose bytes are changed after the etag was
computed (a checksum mismatch), `cut_once` files whose next download stops half-way (the
connection drops); `requests` records every (method, path, Range).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from loopback import loopback


def etag_of(path: str, data: bytes) -> str:
    if path.endswith(".onnx"):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class LocalHub:
    """Repos → commits → files, and what the server saw."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, Any]] = {}
        self.corrupt: set[str] = set()
        self.cut_once: set[str] = set()  # files whose next GET stops half-way (the connection drops)
        self.requests: list[tuple[str, str, str]] = []
        self.url = ""

    def add(self, repo_id: str, folder: Path, *, ref: str = "main", prefix: str = "") -> str:
        """Publish every file of `folder` (under `prefix`) as a new commit of `repo_id` at `ref`."""
        files = {prefix + str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        sha = hashlib.sha1(repr(sorted((k, hashlib.sha1(v).hexdigest()) for k, v in files.items())).encode()).hexdigest()
        repo = self.repos.setdefault(repo_id, {"commits": {}, "refs": {}})
        repo["commits"][sha] = files
        repo["refs"][ref] = sha
        return sha

    def commit(self, repo_id: str, rev: str) -> tuple[str, dict[str, bytes]] | None:
        repo = self.repos.get(repo_id)
        if repo is None:
            return None
        sha = repo["refs"].get(rev, rev)
        return (sha, repo["commits"][sha]) if sha in repo["commits"] else None


class _Handler(BaseHTTPRequestHandler):
    hub: LocalHub

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, head: bool) -> None:
        path = self.path.split("?")[0]
        self.hub.requests.append((self.command, path, self.headers.get("Range", "")))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) == 4:  # `model_info` without a revision
            parts += ["revision", "main"]
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
            found = self.hub.commit(f"{parts[2]}/{parts[3]}", parts[5])
            if found is None:
                self.send_response(404)
                self.send_header("X-Error-Code", "RepoNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            sha, files = found
            if parts[4] == "revision":
                self._json(200, {"id": f"{parts[2]}/{parts[3]}", "modelId": f"{parts[2]}/{parts[3]}", "sha": sha,
                                 "private": False, "siblings": [{"rfilename": f} for f in files]})  # fmt: skip
                return
            self._json(200, [self._entry(f, d) for f, d in files.items()])
            return
        if len(parts) >= 5 and parts[2] == "resolve":
            found = self.hub.commit(f"{parts[0]}/{parts[1]}", parts[3])
            name = "/".join(parts[4:])
            if found is None or name not in found[1]:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound" if found else "RepoNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._file(found[0], name, found[1][name], head)
            return
        self._json(404, {"error": "not found"})

    @staticmethod
    def _entry(path: str, data: bytes) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "path": path, "size": len(data), "oid": etag_of(path + ".git", data)}
        if path.endswith(".onnx"):
            entry["lfs"] = {"oid": etag_of(path, data), "size": len(data), "pointerSize": 130}
        return entry

    def _file(self, sha: str, name: str, data: bytes, head: bool) -> None:
        etag = etag_of(name, data)
        if name in self.hub.corrupt:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        start = 0
        wanted = self.headers.get("Range", "")
        if wanted.startswith("bytes=") and not head:
            start = int(wanted[6:].split("-")[0])
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", sha)
        self.send_header("ETag", f'"{etag}"')
        if name.endswith(".onnx"):
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(len(data)))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        if not head and name in self.hub.cut_once:
            self.hub.cut_once.discard(name)
            self.wfile.write(data[start : start + (len(data) - start) // 2])
            self.wfile.flush()
            self.close_connection = True
        elif not head:
            self.wfile.write(data[start:])

    def do_GET(self) -> None:
        self._route(head=False)

    def do_HEAD(self) -> None:
        self._route(head=True)


@contextmanager
def running_hub() -> Iterator[LocalHub]:
    """A LocalHub served on 127.0.0.1 (its `url` set) for the duration of the block."""
    hub = LocalHub()
    handler = type("Handler", (_Handler,), {"hub": hub})
    with loopback(handler) as hub.url:
        yield hub
