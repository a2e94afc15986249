"""Settings as `ragspine config show` prints them: each variable, its value, where it came from.

Invariants: one row per SETTINGS entry, in declaration order; a secret is never shown (`Secret`
masks it; API keys show only their count), and a password or token inside a URL is redacted.
"""

from __future__ import annotations

from typing import Any

from ragspine.secret import MASK, redact_text
from ragspine.settings.load import ResolvedSettings
from ragspine.settings.schema import SETTINGS


def describe(resolved: ResolvedSettings) -> list[tuple[str, str, str]]:
    """(variable, value as shown, source) for every setting; secrets masked."""
    rows = []
    for setting in SETTINGS:
        value = getattr(resolved.settings, setting.field_name, None)
        rows.append((setting.env, show_value(value), resolved.sources.get(setting.env, "default")))
    return rows


def show_value(value: Any) -> str:
    """A value as `config show` and error messages print it: unset, numbers, masked keys, redacted URLs."""
    if value is None:
        return "(unset)"
    if isinstance(value, tuple) and value and all(isinstance(v, float) for v in value):
        return ",".join(f"{v:g}" for v in value)
    if isinstance(value, tuple):
        return f"{MASK} ({len(value)} keys)" if value else "(none)"
    return redact_text(str(value))  # a password in RAGSPINE_DB, a token in a base URL
