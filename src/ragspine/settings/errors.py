"""The one error a setting raises: it names the variable, where its value came from, and the fix."""

from ragspine.errors import RagspineError


class ConfigError(RagspineError, ValueError):
    """A RAGSPINE_* variable has a value that cannot be used."""
