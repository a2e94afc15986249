"""Which analyzer built an index: a persisted index is served only to the same analyzer.

An analyzer's identity is its `analyzer_id` attribute when it has one, else its module and
qualified name; plus a digest of its module's source file and the Unicode database version
(normalisation and character classes depend on it). A lambda, a closure or a partial has no
stable name: its index is kept in memory only, never persisted.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import sys
import unicodedata
from collections.abc import Callable
from typing import Any


def analyzer_identity(analyzer: Callable[[str], list[str]]) -> dict[str, str] | None:
    """A JSON-able identity of `analyzer`, or None when it cannot be named stably.

    >>> from ragspine.retrieval.lexical.tokenize import tokenize
    >>> analyzer_identity(tokenize)["name"]
    'ragspine.retrieval.lexical.tokenize:tokenize'
    >>> analyzer_identity(lambda text: text.split()) is None
    True
    """
    explicit = getattr(analyzer, "analyzer_id", None)
    module = getattr(analyzer, "__module__", None)
    qualname = getattr(analyzer, "__qualname__", None)
    if explicit:
        name = str(explicit)
    elif isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        name = f"{module}:{qualname}"
    else:
        return None
    return {"name": name, "source": _source_digest(module), "unicode": unicodedata.unidata_version}


def identity_key(identity: dict[str, Any]) -> str:
    """A folder name for an identity: readable prefix plus a digest of the whole identity."""
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", identity["name"].rsplit(":", 1)[-1])[:40]
    return f"{slug}-{digest}"


def _source_digest(module_name: object) -> str:
    module = sys.modules.get(module_name) if isinstance(module_name, str) else None
    try:
        path = inspect.getsourcefile(module) if module is not None else None
        if path:
            with open(path, "rb") as handle:
                return hashlib.sha256(handle.read()).hexdigest()
    except (OSError, TypeError):
        pass
    return ""
