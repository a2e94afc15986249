"""The label step of the ingest pipeline: the one place a document's sensitivity label is read.

Invariants: every label a source gives (a sidecar, Markdown front matter, the caller's label: a
CLI flag, an argument, a form field, a `DocumentMeta`; every matching rule) is normalised and
checked against the known levels, and an unknown one fails the document, naming where it came
from; the strictest of them wins; only when no source labels a document does the default
(INTERNAL) apply; a metadata key is a label key when it folds (`retrieval.sensitivity.fold_key`:
NFKC, case, invisible characters, look-alike letters) to `sensitivity`, and every value of every
such key a source holds (duplicate keys, `SENSITIVITY` beside `sensitivity`) is a label
(`label_keys.gather_labels`): a later one never replaces an earlier one, and a null value is no label, so
it never lowers another; a new version never lowers the stored version's label unless the caller says
so for that document (`kept_label`), and a stored label outside the levels counts as the
strictest (fails closed). `ingest.document` (loaded files and texts), `IngestPipeline` (every
surface: `ragspine ingest`, `Workspace`, HTTP, eval) and `IngestSettings` read labels only here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragspine.ingest.sensitivity_rules import DEFAULT_LEVELS, SensitivityRules
from ragspine.ingest.label_keys import LABEL_KEY, gather_labels
from ragspine.retrieval.sensitivity import check_label, normalize_label, strictest

if TYPE_CHECKING:
    from ragspine.ingest.metadata import DocumentFields
    from ragspine.retrieval.store.protocol import ChunkStoreProtocol

DEFAULT_SENSITIVITY = "INTERNAL"

__all__ = [
    "DEFAULT_SENSITIVITY",
    "LABEL_KEY",
    "caller_label",
    "field_labels",
    "gather_labels",
    "kept_label",
    "kept_warning",
    "label_rules",
    "label_sources",
    "levels_of",
    "read_label",
    "stored_labels",
]


def levels_of(setting: str | Sequence[str] | None) -> tuple[str, ...]:
    """The known labels, least strict first, from RAGSPINE_SENSITIVITY_LEVELS ("A,B,C") or a
    sequence; None or empty: the defaults.

    >>> levels_of("PUBLIC,INTERNAL"), levels_of(None)[-1]
    (('PUBLIC', 'INTERNAL'), 'RESTRICTED')
    """
    if setting is None:
        return DEFAULT_LEVELS
    levels = tuple(setting.split(",")) if isinstance(setting, str) else tuple(setting)
    return levels or DEFAULT_LEVELS


def label_rules(
    rules: SensitivityRules | str | Path | None, levels: str | Sequence[str] | None
) -> SensitivityRules:
    """The rules a run labels with: `rules` (a SensitivityRules, or a rule file whose own
    `levels` take precedence), else none, over the known `levels` (None: the defaults)."""
    known = levels_of(levels)
    if rules is None:
        return SensitivityRules(levels=known)
    return rules if isinstance(rules, SensitivityRules) else SensitivityRules.from_file(rules, levels=known)


def caller_label(label: str, levels: Sequence[str], *, given: bool, source: str) -> str:
    """The caller's label, normalised: checked against `levels` when the caller gave it (a label
    source), else only normalised (the default, checked when a document needs it)."""
    return check_label(label, levels, source=source) if given else normalize_label(label)


def field_labels(fields: DocumentFields) -> tuple[str, ...]:
    """Every label `fields` hold (all of a source's label keys), or its one `sensitivity` field."""
    if fields.labels:
        return fields.labels
    label = fields.known.get(LABEL_KEY)
    return (label,) if label else ()


def label_sources(doc_id: str, *sources: tuple[DocumentFields, str]) -> list[tuple[str, str]]:
    """The (label, where it came from) pairs of the `sources` ((fields, what they are)) that set
    `sensitivity`, e.g. `label_sources(d, (sidecar, "sidecar"), (front, "front matter"))`; a
    source with several labels gives a pair for each."""
    return [(label, f"the {where} of {doc_id!r}") for fields, where in sources for label in field_labels(fields)]


def read_label(
    doc_id: str,
    text: str,
    title: str,
    labels: Sequence[tuple[str, str]],
    *,
    rules: SensitivityRules,
    caller: str | None,
    default: str,
    paths: Sequence[str] = (),
) -> tuple[str, str]:
    """(the strictest label of every source, which kind of source gave it: "document", "rule",
    "argument" or "default"). `labels`: the document's own (label, where) pairs; `caller`: the
    caller's label when given (else None); `default`: the label of a document nothing labels;
    `paths`: more paths the rule globs match besides `doc_id`. ValueError naming the source of
    an unknown label."""
    levels = rules.levels
    found = [(check_label(label, levels, source=where), "document") for label, where in labels]
    ruled = rules.classify(doc_id, text, title, paths=paths)
    if ruled is not None:
        found.append((ruled, "rule"))
    if caller is not None:
        found.append((caller, "argument"))
    if not found:
        where = f"the default label, as nothing labels {doc_id!r}: give it a sensitivity"
        return check_label(default, levels, source=where), "default"
    best = strictest([label for label, _ in found], levels)
    return next((label, kind) for label, kind in found if label == best)


def stored_labels(store: ChunkStoreProtocol, doc_id: str) -> frozenset[str]:
    """The labels (normalised) of the active chunks of `doc_id`; empty when it has none."""
    return frozenset(normalize_label(chunk.sensitivity) for chunk in store.iter_chunks(doc_id=doc_id))


def kept_label(new: str, stored: Iterable[str], levels: Sequence[str], *, lower: bool = False) -> str | None:
    """The stored label a new version labelled `new` must keep instead (the strictest of
    `stored` when it is stricter than `new` and `lower` is False), or None to keep `new`.

    >>> kept_label("PUBLIC", {"CONFIDENTIAL"}, levels_of(None)), kept_label("PUBLIC", {"X"}, ["PUBLIC"])
    ('CONFIDENTIAL', 'X')
    """
    known = [normalize_label(level) for level in levels]
    ranked = sorted(stored, key=lambda label: (known.index(label) if label in known else len(known), label))
    if not ranked or lower:
        return None
    kept = ranked[-1]
    if kept in known and known.index(kept) <= known.index(new):
        return None
    return kept


def kept_warning(kept: str, new: str) -> str:
    """What a run says when it keeps the stored label `kept` over the new version's `new`."""
    return (
        f"kept the stored label {kept}: this version would be labelled {new}, and a label is "
        "only lowered when asked for this document (ragspine ingest --lower-label DOC_ID)"
    )
