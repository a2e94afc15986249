"""The per-user cache folder: files a process builds once per machine and later processes load
(the e5 ONNX graph, the lexical bridge's CC-CEDICT tables).

Invariant: `default_cache_dir()` is `$XDG_CACHE_HOME/ragspine`, else `~/.cache/ragspine`; it is
read on every call (never memoised), so a test's or a user's XDG_CACHE_HOME takes effect at once.
"""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/ragspine`, else `~/.cache/ragspine`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ragspine"
