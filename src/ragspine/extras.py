"""Optional dependencies: the one error and the one import helper every module uses for them.

Invariant: a missing optional package is a `MissingExtraError` (an ImportError) whose message
names what needed it and the extra to install, `pip install 'ragspine[EXTRA]'`; the CLI and
the service catch this one class.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ragspine.errors import RagspineError


class MissingExtraError(RagspineError, ImportError):
    """An optional dependency is not installed; the message names the extra."""


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import `module`, or raise MissingExtraError naming `pip install 'ragspine[extra]'`.

    >>> require("json", extra="none", purpose="test").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{purpose} needs the optional package {module.split('.')[0]!r}: "
            f"pip install 'ragspine[{extra}]'"
        ) from exc
