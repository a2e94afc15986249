"""Constants and small helpers shared by the service tests (fixtures live in conftest.py)."""

from __future__ import annotations

from typing import Any

API_KEY = "test-key-0123456789abcdef"  # a bare key: role write (RAGSPINE_API_KEYS)
AUTH = {"Authorization": f"Bearer {API_KEY}"}
ADMIN_KEY = "admin-Qx7-pL2_vN9wRt4z"
READ_KEY = "read-Hm3_kT8-zB5qWc1y"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
READ = {"Authorization": f"Bearer {READ_KEY}"}
# What the `serve` fixture configures unless told otherwise: one key of each role.
ROLE_KEYS = [API_KEY, f"admin:{ADMIN_KEY}", f"read:{READ_KEY}"]
STUB_ANSWER = "Revenue fell because export orders dropped [1]."
LLM_KEY = "sk-stub-secret-value"
# An environment with nothing set but the dense channel off: `env={}` would resolve
# RAGSPINE_EMBEDDING=auto to e5 where it is installed (slow, and not what these tests are about);
# and every ranked snippet (no relevance floor: tests/integrations/test_min_score.py is about it).
BM25_ENV = {"RAGSPINE_EMBEDDING": "none"}
# The chunking every store made by the library API (build_narrative_retriever) or before issue 15 has.
SPEC_CHUNKING = {"RAGSPINE_CHUNKER": "paragraph", "RAGSPINE_CHUNK_CHARS": "480", "RAGSPINE_CONTEXTUAL": "none"}


def llm_settings(base_url: str, **extra: Any) -> dict[str, Any]:
    """Settings that point a workspace at the stub LLM (short timeout, one retry)."""
    return {"llm_base_url": base_url, "llm_model": "stub-model", "llm_api_key": LLM_KEY,
            "llm_timeout": 0.5, "llm_max_retries": 1, **extra}  # fmt: skip


def doc(doc_id: str, text: str, **meta: Any) -> dict[str, Any]:
    """A POST /documents body."""
    return {"doc_id": doc_id, "text": text, **meta}
