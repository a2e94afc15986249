"""The one constant that guards both RESTRICTED exits (rerank and link).

Invariant: a sensitivity label is RESTRICTED when, ignoring case and surrounding whitespace, it
equals RESTRICTED_SENSITIVITY. Both exits call `is_restricted`; nothing else decides it.
"""

from __future__ import annotations

RESTRICTED_SENSITIVITY = "RESTRICTED"


def is_restricted(sensitivity: object) -> bool:
    """True when the label means RESTRICTED (case- and whitespace-insensitive; fails closed)."""
    return str(sensitivity).strip().upper() == RESTRICTED_SENSITIVITY
