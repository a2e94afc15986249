"""Issue 34, items 1-2: the one label reader fails closed.

Every failure listed under "Labels" in the issue (main at ebe533d) has a regression test here,
run through `ragspine ingest` (the real path), reading the stored label back: a later label
never lowers an earlier one (front matter and sidecar duplicates, key spellings, null); front
matter the reader used to miss (quoted, flow, complex, full-width/zero-width/Cyrillic keys, a
lead before the fence, `----` fences) is read, and a sensitivity key it cannot read (a tab-indented
key, a full-width colon, a nested one) refuses the file naming it and the line; rule keywords
match ordinary variants; a rule file's levels end with RESTRICTED (the check
RAGSPINE_SENSITIVITY_LEVELS gets). A hypothesis property then spells RESTRICTED many ways and
shows no spelling is stored lower.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine.cli import main
from ragspine.ingest.pipeline import ingest_paths
from ragspine.retrieval.store.sqlite import ChunkStore

BODY = "Quarterly exports fell by four percent in the northern region."


def _ingest(root: Path, db: Path, *extra: str) -> tuple[int, dict[str, str], dict[str, str], str]:
    """`ragspine ingest ROOT --db DB EXTRA...`: (exit code, {doc_id: label}, {doc_id: text}, stderr)."""
    result = CliRunner().invoke(main, ["ingest", str(root), "--db", str(db), *extra])
    labels: dict[str, str] = {}
    texts: dict[str, str] = {}
    if db.exists():
        with ChunkStore(str(db)) as store:
            for chunk in store.iter_chunks():
                labels[chunk.doc_id] = chunk.sensitivity
                texts[chunk.doc_id] = texts.get(chunk.doc_id, "") + chunk.text
    return result.exit_code, labels, texts, result.stderr


def _one(tmp_path: Path, name: str, content: str | bytes, sidecar: str | None = None, *extra: str):
    root = tmp_path / "docs"
    root.mkdir(exist_ok=True)
    path = root / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    if sidecar is not None:
        (root / f"{name}.meta.json").write_text(sidecar, "utf-8")
    return _ingest(root, tmp_path / "s.db", *extra)


# -- a later label never lowers an earlier one ----------------------------------------------------


def test_a_later_front_matter_label_does_not_lower_an_earlier_one(tmp_path: Path) -> None:
    code, labels, _, err = _one(tmp_path, "memo.md", f"---\nsensitivity: RESTRICTED\nsensitivity: PUBLIC\n---\n{BODY}")
    assert code == 0, err
    assert labels == {"memo.md": "RESTRICTED"}


@pytest.mark.parametrize(
    "sidecar",
    [
        '{"sensitivity":"RESTRICTED","sensitivity":"PUBLIC"}',
        '{"SENSITIVITY":"RESTRICTED","sensitivity":"PUBLIC"}',
        '{"sensitivity":"RESTRICTED","sensitivity ":"PUBLIC"}',
        '{"sensitivity":"restricted","sensitivity":null}',
        '{"se\u0578sitivity":"R\u04bdSTRICTED","sensitivity":"PUBLIC"}',
    ],
)
def test_a_later_sidecar_label_does_not_lower_an_earlier_one(tmp_path: Path, sidecar: str) -> None:
    code, labels, _, err = _one(tmp_path, "memo.md", f"# Memo\n\n{BODY}", sidecar)
    assert code == 0, err
    assert labels == {"memo.md": "RESTRICTED"}


def test_null_in_front_matter_does_not_lower_the_sidecar(tmp_path: Path) -> None:
    code, labels, _, err = _one(tmp_path, "memo.md", f"---\nsensitivity: null\n---\n{BODY}", '{"sensitivity": "RESTRICTED"}')
    assert code == 0, err
    assert labels == {"memo.md": "RESTRICTED"}


# -- front matter the reader used to miss is read ---------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        f'---\n"sensitivity": RESTRICTED\n---\n{BODY}',  # a quoted key
        f"---\n{{sensitivity: RESTRICTED}}\n---\n{BODY}",  # a flow mapping
        f"---\n? sensitivity\n: RESTRICTED\n---\n{BODY}",  # a complex key
        f"---\nｓｅｎｓｉｔｉｖｉｔｙ: RESTRICTED\n---\n{BODY}",  # full-width key
        f"---\nsens\u200bitivity: RESTRICTED\n---\n{BODY}",  # a zero-width space in the key
        f"---\ns\u0435nsitivity: RESTRICTED\n---\n{BODY}",  # Cyrillic е in the key
        f"---\nse\u0578sitivity: R\u04bdSTRICT\u04bdD\n---\n{BODY}",  # TR39-only look-alikes (ո, ҽ)
        f"\n---\nsensitivity: RESTRICTED\n---\n{BODY}",  # a blank line before the fence
        f" ---\nsensitivity: RESTRICTED\n---\n{BODY}",  # a space before the fence
        f"\u200b---\nsensitivity: RESTRICTED\n---\n{BODY}",  # a zero-width space before the fence
        f"----\nsensitivity: RESTRICTED\n----\n{BODY}",  # ---- fences
        f'+++\n"Sensitivity" = "RESTRICTED"\n+++\n{BODY}',  # TOML, another case
    ],
)
def test_front_matter_forms_are_read(tmp_path: Path, content: str) -> None:
    code, labels, texts, err = _one(tmp_path, "memo.md", content)
    assert code == 0, err
    assert labels == {"memo.md": "RESTRICTED"}
    assert "RESTRICTED" not in texts["memo.md"]  # the front matter is not searchable text


def test_a_bom_before_the_front_matter_is_tolerated(tmp_path: Path) -> None:
    content = b"\xef\xbb\xbf\n---\nsensitivity: RESTRICTED\n---\n" + BODY.encode()
    code, labels, _, err = _one(tmp_path, "memo.md", content)
    assert code == 0, err
    assert labels == {"memo.md": "RESTRICTED"}


@pytest.mark.parametrize(
    ("content", "line"),
    [
        (f"---\ntitle: Memo\n\tsensitivity: RESTRICTED\n---\n{BODY}", 3),  # a tab-indented key
        (f"---\nsensitivity：RESTRICTED\n---\n{BODY}", 2),  # a full-width colon
        (f"---\ntitle: Memo\nsensitivity：RESTRICTED\n---\n{BODY}", 3),
        (f"---\ntitle: Memo\nmeta: {{sensitivity: RESTRICTED}}\n---\n{BODY}", 3),  # nested
        (f'+++\ntitle = "Memo"\n[meta]\nsensitivity = "RESTRICTED"\n+++\n{BODY}', 4),  # TOML table
        (f"---\nsensitivity: RESTRICTED\n{BODY}", 2),  # never closed
    ],
)
def test_a_sensitivity_key_that_is_not_read_refuses_the_file(tmp_path: Path, content: str, line: int) -> None:
    code, labels, _, err = _one(tmp_path, "memo.md", content)
    assert code == 1
    assert "memo.md" not in labels  # refused, never ingested at a lower label
    failure = next(row for row in err.splitlines() if "memo.md" in row)
    assert f"line {line}:" in failure and "sensitivity" in failure


# -- rules -----------------------------------------------------------------------------------------

RULES = '[[rules]]\nlabel = "RESTRICTED"\nkeywords = ["strictly confidential", "绝密"]\n'


@pytest.mark.parametrize(
    "phrase",
    [
        "STRICTLY\nCONFIDENTIAL",
        "strictly  confidential",
        "strictly\u00a0confidential",
        "strictly-confidential",
        "ｓｔｒｉｃｔｌｙ ｃｏｎｆｉｄｅｎｔｉａｌ",
        "本文件绝\u200b密",
    ],
)
def test_rule_keywords_match_ordinary_variants(tmp_path: Path, phrase: str) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES, "utf-8")
    code, labels, _, err = _one(tmp_path, "memo.txt", f"{BODY}\n{phrase}\n", None, "--rules", str(rules))
    assert code == 0, err
    assert labels == {"memo.txt": "RESTRICTED"}


@pytest.mark.parametrize(
    "levels",
    [
        '["PUBLIC", "INTERNAL", "RESTRICTED", "SECRET"]',  # a level above RESTRICTED
        '["PUBLIC", "INTERNAL", "SECRET"]',  # RESTRICTED left out
    ],
)
def test_a_rule_file_whose_levels_do_not_end_with_restricted_is_refused(tmp_path: Path, levels: str) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(f'levels = {levels}\n[[rules]]\nlabel = "SECRET"\npaths = ["*"]\n', "utf-8")
    code, labels, _, err = _one(tmp_path, "memo.txt", BODY, None, "--rules", str(rules))
    assert code != 0 and labels == {}
    assert "RESTRICTED must be the last (strictest) level" in err


def test_rule_levels_and_the_levels_setting_share_one_check() -> None:
    from ragspine.ingest.sensitivity_rules import SensitivityRules
    from ragspine.settings.values import SENSITIVITY_LEVELS, check_levels

    for bad in (["PUBLIC", "RESTRICTED", "SECRET"], ["PUBLIC", "SECRET"], ["RESTRICTED"]):
        with pytest.raises(ValueError) as from_check:
            check_levels(bad)
        with pytest.raises(ValueError) as from_setting:
            SENSITIVITY_LEVELS(",".join(bad))
        with pytest.raises(ValueError) as from_rules:
            SensitivityRules.from_dict({"levels": bad, "rules": []})
        assert str(from_check.value) in str(from_setting.value) and str(from_check.value) in str(from_rules.value)


def test_a_rule_with_an_unknown_label_is_refused(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\nlabel = "TOP-SECRET"\npaths = ["*"]\n', "utf-8")
    code, labels, _, err = _one(tmp_path, "memo.txt", BODY, None, "--rules", str(rules))
    assert code != 0 and labels == {} and "TOP-SECRET" in err


# -- property: no spelling of RESTRICTED is stored lower -----------------------------------------

_INVISIBLE = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")
# Look-alikes of Latin letters: Cyrillic (the hand table) and some only the TR39 table lists
# (Armenian ո, Abkhasian ҽ, Latin iota ɩ, Coptic ⲥ, izhitsa ѵ, r without handle ꭇ).
_LOOKALIKE = {
    "e": "\u0435\u04bd", "s": "\u0455\u01bd", "i": "\u0456\u0269", "y": "\u0443", "t": "\u0442",
    "c": "\u0441\u2ca5", "n": "\u0578", "v": "\u0475", "r": "\uab47",
}  # fmt: skip


def _spell(word: str, rng: random.Random, *, lookalikes: bool) -> str:
    """`word` with each letter in a random case, full-width or (`lookalikes`) Cyrillic form,
    and invisible characters inserted at random."""
    out = []
    for letter in word:
        form = rng.randrange(5 if lookalikes else 4)
        ch = (letter.lower(), letter.upper(), chr(ord(letter.lower()) + 0xFEE0), chr(ord(letter.upper()) + 0xFEE0))[
            form
        ] if form < 4 else rng.choice(_LOOKALIKE.get(letter.lower(), letter))
        out.append(ch)
        if rng.random() < 0.15:
            out.append(rng.choice(_INVISIBLE))
    return "".join(out)


def _around(value: str, rng: random.Random) -> str:
    return rng.choice(("", " ", "\u3000", "\u200b", "\u00a0")) + value + rng.choice(("", " ", "\u3000", "\u200b"))


def _document(rng: random.Random) -> tuple[str, str | None]:
    """A Markdown file (and maybe a sidecar) whose label spells RESTRICTED, beside a decoy PUBLIC."""
    key = _spell("sensitivity", rng, lookalikes=True)
    value = _around(_spell("restricted", rng, lookalikes=True), rng)
    decoy_first = rng.random() < 0.5
    form = rng.choice(("yaml", "yaml-quoted", "yaml-flow", "toml", "sidecar"))
    lead = rng.choice(("", "\n", "\n\n", " ", "\u200b", "\ufeff", " \n"))
    fence = rng.choice(("---", "----", "-----"))
    if form == "sidecar":
        pairs = [(key, value), ("sensitivity", "PUBLIC")]
        pairs = pairs[::-1] if decoy_first else pairs
        sidecar = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
        return f"{lead}# Memo\n\n{BODY}", sidecar
    if form == "toml":
        lines = [f"{json.dumps(key)} = {json.dumps(value)}", 'sensitivity = "PUBLIC"']
        fence = "+" * len(fence)
    elif form == "yaml-flow":
        lines = ["{" + f"{json.dumps(key)}: {json.dumps(value)}, sensitivity: PUBLIC" + "}"]
    else:
        spelt = json.dumps(key) if form == "yaml-quoted" else key
        lines = [f"{spelt}: {json.dumps(value)}", "sensitivity: PUBLIC"]
    lines = lines[::-1] if decoy_first else lines
    return lead + fence + "\n" + "\n".join(lines) + f"\n{fence}\n{BODY}", None


def _keyword_phrase(rng: random.Random) -> str:
    """`strictly confidential` or `绝密` with whitespace/hyphen runs, invisible and full-width letters."""
    if rng.random() < 0.3:
        return "本文件" + "绝" + rng.choice(("", *_INVISIBLE)) + "密"
    gap = "".join(rng.choice((" ", "\n", "\u00a0", "\u3000", "-", "\u2010", "\t", "\u200b")) for _ in range(rng.randint(1, 3)))
    if not any(ch in gap for ch in " \n\u00a0\u3000-\u2010\t"):
        gap += " "
    return _spell("strictly", rng, lookalikes=False) + gap + _spell("confidential", rng, lookalikes=False)


def _write(root: Path, name: str, content: str, sidecar: str | None) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(content, "utf-8")
    if sidecar is not None:
        (root / f"{name}.meta.json").write_text(sidecar, "utf-8")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_no_spelling_of_restricted_is_stored_lower(tmp_path_factory: pytest.TempPathFactory, seed: int) -> None:
    rng = random.Random(seed)
    tmp = tmp_path_factory.mktemp("spell")
    root = tmp / "docs"
    content, sidecar = _document(rng)
    _write(root, "memo.md", content, sidecar)
    _write(root, "rule.md", f"# Rule\n\n{BODY}\n{_keyword_phrase(rng)}\n", None)
    rules = tmp / "rules.toml"
    rules.write_text(RULES, "utf-8")
    db = tmp / "s.db"
    report = ingest_paths([root], str(db), rules=str(rules), progress=False)
    with ChunkStore(str(db)) as store:
        labels = {chunk.doc_id: chunk.sensitivity for chunk in store.iter_chunks()}
    failed = {failure.path.name for failure in report.failures}
    assert labels.get("rule.md") == "RESTRICTED", (content, report.failures)
    assert labels.get("memo.md") == "RESTRICTED" or ("memo.md" in failed and "memo.md" not in labels), (
        repr(content), sidecar, labels, report.failures,
    )
