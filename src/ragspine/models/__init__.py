"""Models the way users get them: a local folder or a hub id (`ORG/NAME[@REVISION]`), resolved
to checked files on disk by `resolve_model`, cached by `huggingface_hub` (the `[hub]` extra).

Invariant: this package imports only `ragspine.errors` and `ragspine.extras` (it sits below the
retrieval stages and never reads settings); slots pass it the setting name for their errors.
"""

from ragspine.models.hub import HubRef, ModelNotPulled, hub_spelling, parse_hub_ref
from ragspine.models.resolve import ResolvedModel, pick_onnx, resolve_model

__all__ = ["HubRef", "ModelNotPulled", "ResolvedModel", "hub_spelling", "parse_hub_ref", "pick_onnx", "resolve_model"]
