"""Sensitivity rules: file-name globs and keywords that label documents (e.g. RESTRICTED).

Invariants: with no rule file nothing is labelled by a rule; a document matched by several rules
gets the strictest of their labels (the last in `levels`), so adding a rule can only tighten;
a rule file with an unknown label, an unknown key or a rule without any glob or keyword is
rejected when it is loaded, never half-applied. Globs follow `globs.glob_match` over the doc_id
and over the file's path relative to every folder above it (`ingest.document.anchored_paths`),
so `hr/` labels `crowd/hr/memo.md` whether the run names `crowd` or `crowd/hr`; keywords match
anywhere in the document's title or text, both compared in `retrieval.sensitivity.match_form`
(NFKC, case-folded, invisible characters dropped, whitespace/hyphen runs one space), so
`strictly confidential` matches `STRICTLY\nCONFIDENTIAL`, `strictly-confidential`, full-width
letters and `绝\u200b密` matches `绝密`. A rule file that declares `levels` must end them with
RESTRICTED (`settings.values.check_levels`, the check RAGSPINE_SENSITIVITY_LEVELS gets). A rule's label is one of the
sources the pipeline takes the strictest of: a sidecar or front matter label never loosens it. Labels and levels
are spelled by `retrieval.sensitivity.normalize_label` (the one normaliser).

Rule file (TOML, or the same structure as JSON):

    levels = ["PUBLIC", "INTERNAL", "CONFIDENTIAL", "RESTRICTED"]   # optional; this is the default

    [[rules]]
    label = "RESTRICTED"
    paths = ["hr/", "*salary*"]
    keywords = ["绝密", "strictly confidential"]
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ragspine.ingest.globs import any_match
from ragspine.retrieval.sensitivity import DEFAULT_LEVELS, check_label, match_form, normalize_label
from ragspine.settings.values import check_levels

__all__ = ["DEFAULT_LEVELS", "SensitivityRule", "SensitivityRules", "normalize_label"]
_RULE_KEYS = frozenset({"label", "paths", "keywords"})
_FILE_KEYS = frozenset({"levels", "rules"})


@dataclass(frozen=True)
class SensitivityRule:
    """Documents whose doc_id matches any glob, or whose text holds any keyword, get `label`."""

    label: str
    paths: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()


@dataclass(frozen=True)
class SensitivityRules:
    """An ordered rule set; `classify` returns the strictest matching label, or None.

    >>> rules = SensitivityRules((SensitivityRule("RESTRICTED", keywords=("绝密",)),))
    >>> rules.classify("memo.md", "本文件绝密"), rules.classify("memo.md", "公开信息")
    ('RESTRICTED', None)
    """

    rules: tuple[SensitivityRule, ...] = ()
    levels: tuple[str, ...] = DEFAULT_LEVELS
    _folded_keywords: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(normalize_label(level) for level in self.levels))
        for number, rule in enumerate(self.rules, start=1):
            check_label(rule.label, self.levels, source=f"sensitivity rule {number}")
            if not rule.paths and not rule.keywords:
                raise ValueError(f"sensitivity rule for {rule.label!r} has neither paths nor keywords")
        folded = tuple(tuple(match_form(k).strip() for k in rule.keywords) for rule in self.rules)
        for number, keywords in enumerate(folded, start=1):
            if not all(keywords):
                raise ValueError(f"sensitivity rule {number} has a keyword with no visible letters")
        object.__setattr__(self, "_folded_keywords", folded)

    def classify(self, doc_id: str, text: str, title: str = "", *, paths: Sequence[str] = ()) -> str | None:
        """The strictest label among the rules that match, or None when none does; `paths`:
        more paths of the same file the globs are matched against besides `doc_id`."""
        haystack: str | None = None
        best: int | None = None
        names = (doc_id, *paths)
        for rule, keywords in zip(self.rules, self._folded_keywords, strict=True):
            matched = any(any_match(rule.paths, name) for name in names)
            if not matched and keywords:
                if haystack is None:
                    haystack = match_form(f"{title}\n{text}")
                matched = any(keyword in haystack for keyword in keywords)
            if matched:
                rank = self.levels.index(normalize_label(rule.label))
                best = rank if best is None else max(best, rank)
        return None if best is None else self.levels[best]

    def fingerprint(self) -> str:
        """A digest that changes whenever the rules would label anything differently."""
        data = {"levels": list(self.levels), "rules": [asdict(rule) for rule in self.rules]}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()

    @classmethod
    def from_file(cls, path: str | Path, *, levels: Sequence[str] = DEFAULT_LEVELS) -> SensitivityRules:
        """Load a TOML (or, by its `.json` suffix, JSON) rule file; ValueError naming the file if
        bad. `levels`: the known labels when the file declares none."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"sensitivity rules {path}: cannot read ({exc.strerror or exc})") from exc
        try:
            if path.suffix.lower() == ".json":
                data = json.loads(raw.decode("utf-8-sig"))
            else:
                data = tomllib.loads(raw.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"sensitivity rules {path}: cannot parse ({exc})") from exc
        try:
            return cls.from_dict(data, levels=levels)
        except ValueError as exc:
            raise ValueError(f"sensitivity rules {path}: {exc}") from exc

    @classmethod
    def from_dict(cls, data: Any, *, levels: Sequence[str] = DEFAULT_LEVELS) -> SensitivityRules:
        """Build from the parsed rule-file structure (see the module docstring); `levels`: the
        known labels when it declares none."""
        if not isinstance(data, Mapping):
            raise ValueError("expected a table/object with 'rules' (and optionally 'levels')")
        _check_keys(data, _FILE_KEYS, "the rule file")
        known = tuple(_labels(data.get("levels", list(levels)), "levels"))
        if not known or len(set(known)) != len(known):
            raise ValueError("'levels' must list distinct labels, least strict first")
        if "levels" in data:
            try:
                check_levels(known)
            except ValueError as exc:
                raise ValueError(f"'levels' {list(known)}: {exc}") from exc
        rules_data = data.get("rules", [])
        if not isinstance(rules_data, list):
            raise ValueError("'rules' must be a list of rules ([[rules]] in TOML)")
        rules = []
        for number, item in enumerate(rules_data, start=1):
            if not isinstance(item, Mapping):
                raise ValueError(f"rule {number} must be a table/object")
            _check_keys(item, _RULE_KEYS, f"rule {number}")
            if not isinstance(item.get("label"), str) or not item["label"].strip():
                raise ValueError(f"rule {number} needs a 'label'")
            rules.append(
                SensitivityRule(
                    label=normalize_label(item["label"]),
                    paths=tuple(_strings(item.get("paths", []), f"rule {number} 'paths'")),
                    keywords=tuple(_strings(item.get("keywords", []), f"rule {number} 'keywords'")),
                )
            )
        return cls(tuple(rules), known)


def _labels(values: Any, what: str) -> list[str]:
    return [normalize_label(v) for v in _strings(values, what)]


def _strings(values: Any, what: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise ValueError(f"{what} must be a list of strings")
    if not all(isinstance(v, str) and v.strip() for v in values):
        raise ValueError(f"{what} must hold only non-empty strings")
    return [v.strip() for v in values]


def _check_keys(data: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"{what} has unknown key(s) {unknown}; allowed: {sorted(allowed)}")
