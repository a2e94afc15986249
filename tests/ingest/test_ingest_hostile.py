"""Issue 14: labels that cannot be lost or loosened at ingest, and hostile or odd input files.

Each test is the regression test of one reproduced fault (the item number in its docstring): a
re-run without the rule that labelled a file, a rule file used with another spelling of the
folder, a weaker label from another source, near-miss sidecar names, a YAML alias bomb, an AES
PDF, garbled text, nested DOCX tables, TOML front matter, BOM-less UTF-16/32, binary files named
.txt, and symlinks. Real files, a real SQLite store, the real CLI (click's runner).
"""

from __future__ import annotations

import io
import json
import re
import time
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from ingest_fixtures import write_pdf

import ragspine
from ragspine.cli import main
from ragspine.ingest.loaders import load_document
from ragspine.ingest.pipeline import ingest_paths
from ragspine.ingest.registry import DocumentRegistry
from ragspine.retrieval.store.sqlite import ChunkStore
from ragspine.settings.config import ConfigError, load_settings

BM25 = {"RAGSPINE_RETRIEVAL_MODE": "bm25"}
RULES = '[[rules]]\nlabel = "RESTRICTED"\npaths = ["hr/"]\n'


def _labels(db: Path) -> dict[str, str]:
    with ChunkStore(db) as store:
        return {chunk.doc_id: chunk.sensitivity for chunk in store.iter_chunks()}


def _ingest(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["ingest", *args], env=BM25)
    return result.exit_code, result.output


# -- #3 labels are never lowered implicitly ------------------------------------------------------
@pytest.mark.parametrize("how", ["rules", "sensitivity"])
def test_a_rerun_without_the_labelling_option_keeps_the_stricter_label(tmp_path: Path, how: str) -> None:
    """#3: labelled RESTRICTED by --rules or --sensitivity, re-ingested unchanged without it."""
    crowd = tmp_path / "crowd"
    (crowd / "hr").mkdir(parents=True)
    (crowd / "hr" / "pay.md").write_text("Salary bands, codename heron.\n", "utf-8")
    (tmp_path / "r.toml").write_text(RULES, "utf-8")
    db = str(tmp_path / "s.db")
    option = ["--rules", str(tmp_path / "r.toml")] if how == "rules" else ["--sensitivity", "RESTRICTED"]
    assert _ingest(str(crowd), "--db", db, *option)[0] == 0
    assert _labels(Path(db)) == {"hr/pay.md": "RESTRICTED"}
    code, output = _ingest(str(crowd), "--db", db)  # the option forgotten
    assert code == 0, output
    assert _labels(Path(db)) == {"hr/pay.md": "RESTRICTED"}
    assert "warning:" in output and "kept the stored label RESTRICTED" in output and "--lower-label" in output
    with ragspine.open(db, env=BM25) as ws:
        assert ws.search("codename heron") == []
    code, output = _ingest(str(crowd), "--db", db)  # again: unchanged, still RESTRICTED
    assert code == 0 and _labels(Path(db)) == {"hr/pay.md": "RESTRICTED"}
    code, output = _ingest(str(crowd), "--db", db, "--lower-label", "hr/pay.md")  # said explicitly
    assert code == 0, output
    assert _labels(Path(db)) == {"hr/pay.md": "INTERNAL"}


def test_workspace_and_upload_keep_the_stricter_stored_label(tmp_path: Path) -> None:
    """#3 through `ragspine.open`: ingest_text / ingest_bytes never lower without lower_label."""
    with ragspine.open(tmp_path / "ws", env=BM25) as ws:
        ws.ingest("Layoffs planned, codename heron.", doc_id="memo", sensitivity="RESTRICTED")
        result = ws.ingest("Layoffs planned, codename heron.", doc_id="memo", sensitivity="PUBLIC")
        assert result.warnings and "kept the stored label RESTRICTED" in result.warnings[0]
        assert {c.sensitivity for c in ws.store.iter_chunks(doc_id="memo")} == {"RESTRICTED"}
        result = ws.ingest_bytes("memo.md", b"---\nsensitivity: public\n---\nLayoffs, codename heron.\n", doc_id="memo")
        assert {c.sensitivity for c in ws.store.iter_chunks(doc_id="memo")} == {"RESTRICTED"}
        assert ws.search("codename heron") == []
        ws.ingest("Layoffs planned, codename heron.", doc_id="memo", sensitivity="PUBLIC", lower_label=True)
        assert {c.sensitivity for c in ws.store.iter_chunks(doc_id="memo")} == {"PUBLIC"}
        raised = ws.ingest("Now restricted again.", doc_id="memo", sensitivity="RESTRICTED")
        assert not raised.warnings  # raising a label is never held back


# -- #4 rules do not depend on how the folder is named --------------------------------------------
@pytest.mark.parametrize("given", ["crowd", "crowd/hr", "crowd/hr/pay.md", "./crowd/../crowd/hr"])
def test_a_rule_labels_the_same_file_however_the_folder_is_named(
    tmp_path: Path, given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#4: `ingest crowd --rules r.toml` and `ingest crowd/hr --rules r.toml` agree."""
    (tmp_path / "crowd" / "hr").mkdir(parents=True)
    (tmp_path / "crowd" / "hr" / "pay.md").write_text("Salary bands.\n", "utf-8")
    (tmp_path / "r.toml").write_text(RULES, "utf-8")
    db = tmp_path / "s.db"
    monkeypatch.chdir(tmp_path)
    report = ingest_paths([Path(given)], str(db), rules=tmp_path / "r.toml")
    assert not report.failures
    assert set(_labels(db).values()) == {"RESTRICTED"}


# -- #6 the strictest label of every source wins; near-miss sidecars warn -------------------------
def test_front_matter_cannot_loosen_the_form_field(tmp_path: Path) -> None:
    """#6: an upload's `sensitivity: PUBLIC` front matter against the form field RESTRICTED."""
    with ragspine.open(tmp_path / "ws", env=BM25) as ws:
        ws.ingest_bytes("x.md", b"---\nsensitivity: PUBLIC\n---\nCodename heron.\n", sensitivity="RESTRICTED")
        ws.ingest_bytes("y.md", b"---\nsensitivity: RESTRICTED\n---\nCodename egret.\n", sensitivity="PUBLIC")
        ws.ingest_bytes("z.md", b"---\nsensitivity: PUBLIC\n---\nCodename ibis.\n")
        labels = {c.doc_id: c.sensitivity for c in ws.store.iter_chunks()}
    assert labels == {"x.md": "RESTRICTED", "y.md": "RESTRICTED", "z.md": "PUBLIC"}


def test_a_stray_public_line_does_not_unrestrict_a_rule(tmp_path: Path) -> None:
    """#6: docs/ingest.md said a sidecar or front matter label wins over every rule."""
    (tmp_path / "d" / "hr").mkdir(parents=True)
    (tmp_path / "d" / "hr" / "pay.md").write_text("---\nsensitivity: public\n---\nSalary bands.\n", "utf-8")
    (tmp_path / "d" / "hr" / "bonus.txt").write_text("Bonus pool.\n", "utf-8")
    (tmp_path / "d" / "hr" / "bonus.txt.meta.json").write_text('{"sensitivity": "PUBLIC"}', "utf-8")
    (tmp_path / "r.toml").write_text(RULES, "utf-8")
    db = tmp_path / "s.db"
    ingest_paths([tmp_path / "d"], str(db), rules=tmp_path / "r.toml")
    assert _labels(db) == {"hr/pay.md": "RESTRICTED", "hr/bonus.txt": "RESTRICTED"}


@pytest.mark.parametrize("sidecar", ["x.txt.meta.JSON", "x.TXT.meta.json", "x.Meta.json"])
def test_a_near_miss_sidecar_name_warns(tmp_path: Path, sidecar: str) -> None:
    """#6: sidecars named `x.txt.meta.JSON` / `x.TXT.meta.json` were ignored silently."""
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "x.txt").write_text("Board notes.\n", "utf-8")
    (folder / sidecar).write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    code, output = _ingest(str(folder), "--db", str(tmp_path / "s.db"))
    assert code == 0, output
    assert f"warning: {folder / 'x.txt'}: {sidecar} is not read as the sidecar" in output
    assert "x.txt.meta.json" in output


def test_ingest_md_no_longer_says_a_document_label_wins_over_rules() -> None:
    """#6: the documentation stated the old precedence."""
    text = (Path(__file__).parents[2] / "docs" / "ingest.md").read_text("utf-8")
    assert "wins over every rule" not in text
    assert "strictest" in text


# -- #10 YAML alias bomb -------------------------------------------------------------------------
def _alias_bomb(levels: int = 9) -> bytes:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    return ("---\n" + "\n".join(lines) + "\n---\nbody text\n").encode()


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    """#10: a 367-byte upload took 28 s and 1.78 GB. Refused; the run stays well under a second
    (a generous bound so a loaded machine cannot make it flaky: the bomb took tens of seconds)."""
    bomb = _alias_bomb()
    assert len(bomb) < 400
    started = time.monotonic()
    with ragspine.open(tmp_path / "ws", env=BM25) as ws:
        with pytest.raises(ValueError, match="aliases"):
            ws.ingest_bytes("bomb.md", bomb)
        assert ws.store.iter_chunks() == []
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("x: " + "[" * 40 + "]" * 40, "deeper than"),
        ("a: &x 1\nb: *x", "aliases"),
        ("big: '" + "x" * 70000 + "'", "at most"),
    ],
)
def test_front_matter_limits(tmp_path: Path, front: str, message: str) -> None:
    """#10: depth, alias and size limits, each with a reason."""
    path = tmp_path / "m.md"
    with pytest.raises(ValueError, match=message):
        load_document(path, f"---\n{front}\n---\nbody\n".encode())


# -- #15 AES-encrypted PDFs with an empty password ------------------------------------------------
def test_an_aes_pdf_with_an_empty_user_password_is_read(tmp_path: Path) -> None:
    """#15: `ragspine[pdf]` lacked `cryptography`, so these PDFs failed."""
    import pypdf

    plain = write_pdf(tmp_path / "plain.pdf", ["Encrypted annual report: revenue fell."])
    writer = pypdf.PdfWriter(clone_from=str(plain))
    writer.encrypt(user_password="", owner_password="owner-secret", algorithm="AES-256")
    buffer = io.BytesIO()
    writer.write(buffer)
    assert pypdf.PdfReader(io.BytesIO(buffer.getvalue())).is_encrypted
    loaded = load_document(tmp_path / "aes.pdf", buffer.getvalue())
    assert "revenue fell" in loaded.text


def test_the_pdf_extra_installs_cryptography() -> None:
    """#15: the extra a user installs for PDFs (and `ingest`, and the tests) carries it."""
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text("utf-8"))["project"]
    for extra in ("pdf", "ingest", "test"):
        assert any(r.startswith("cryptography") for r in project["optional-dependencies"][extra]), extra


# -- #16 garbled text ------------------------------------------------------------------------------
GLYPHS = " ".join("/g18/g152/g3/g77/g201" for _ in range(40))


def test_garbled_text_warns_is_marked_and_can_be_skipped(tmp_path: Path) -> None:
    """#16: glyph-name text and mojibake were ingested as success."""
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "glyphs.txt").write_text(GLYPHS, "utf-8")
    mojibake = "Café d’été — résumé naïve, “quoted” façade. " * 10
    (folder / "mojibake.txt").write_text(mojibake.encode("utf-8").decode("cp1252", "replace"), "utf-8")
    (folder / "fine.txt").write_text("Revenue fell because export orders declined; café prices rose.", "utf-8")
    db = tmp_path / "s.db"
    code, output = _ingest(str(folder), "--db", str(db))
    assert code == 0, output
    garbled = set(re.findall(r"/(\w+\.txt): \d+% of the text looks garbled", output))
    assert "warnings: 2" in output and garbled == {"glyphs.txt", "mojibake.txt"}
    with DocumentRegistry(db) as registry:
        marks = {r.doc_id: r.metadata_dict().get("garbled") for r in registry.all()}
    assert marks["fine.txt"] is None and marks["glyphs.txt"] >= 0.9 and marks["mojibake.txt"] >= 0.2
    skipped = tmp_path / "skipped.db"
    code, output = _ingest(str(folder), "--db", str(skipped), "--skip-garbled")
    assert code == 1 and "skipped (--skip-garbled)" in output
    assert set(_labels(skipped)) == {"fine.txt"}


# -- #17 odd files -------------------------------------------------------------------------------
def test_docx_text_in_nested_tables_is_kept(tmp_path: Path) -> None:
    """#17: text inside a table inside a table cell was dropped."""
    import docx

    document = docx.Document()
    outer = document.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "outer cell"
    inner = outer.cell(0, 1).add_table(rows=2, cols=2)
    inner.cell(0, 0).text = "inner heron"
    inner.cell(1, 1).text = "inner egret"
    deeper = inner.cell(1, 0).add_table(rows=1, cols=1)
    deeper.cell(0, 0).text = "deepest ibis"
    path = tmp_path / "nested.docx"
    document.save(str(path))
    text = load_document(path, path.read_bytes()).text
    for words in ("outer cell", "inner heron", "inner egret", "deepest ibis"):
        assert words in text


def test_toml_front_matter_is_parsed_not_indexed(tmp_path: Path) -> None:
    """#17: `+++` front matter was indexed as text (and its label ignored)."""
    data = b'+++\ntitle = "Heron memo"\nsensitivity = "RESTRICTED"\nowner = "legal"\n+++\nLayoffs planned.\n'
    loaded = load_document(tmp_path / "m.md", data)
    assert loaded.text.strip() == "Layoffs planned." and loaded.metadata["owner"] == "legal"
    with ragspine.open(tmp_path / "ws", env=BM25) as ws:
        ws.ingest_bytes("m.md", data)
        (chunk,) = ws.store.iter_chunks()
    assert chunk.sensitivity == "RESTRICTED" and "+++" not in chunk.text and chunk.title == "Heron memo"


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_bomless_utf16_and_utf32_are_detected(tmp_path: Path, codec: str) -> None:
    """#17: BOM-less UTF-16/32 ASCII was read as UTF-8 with the NULs stripped."""
    text = "Revenue fell because export orders declined.\nMargins held.\n"
    loaded = load_document(tmp_path / "a.txt", text.encode(codec))
    assert loaded.text == text and loaded.encoding == codec


@pytest.mark.parametrize(
    "data",
    [bytes(range(256)) * 8, b"\x89PNG\r\n\x1a\n" + bytes(200), b"PK\x03\x04" + b"\x14\x00" * 50, b"\x7fELF\x02\x01" + bytes(99)],
)
def test_a_binary_file_named_txt_says_binary_file(tmp_path: Path, data: bytes) -> None:
    """#17: it got an encoding message instead."""
    path = tmp_path / "image.txt"
    path.write_bytes(data)
    report = ingest_paths([path], str(tmp_path / "s.db"))
    (failure,) = report.failures
    assert "binary file" in failure.reason


def test_symlinks_that_leave_the_folder_are_not_followed(tmp_path: Path) -> None:
    """#17: a symlink to a file outside was followed (documents duplicated); a symlinked folder
    was skipped silently. Now links to files and folders are treated alike: never followed; a
    target inside is ingested under its own path, one outside is named in a warning."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("Outside the folder.\n", "utf-8")
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "a.txt").write_text("Inside the folder.\n", "utf-8")
    (root / "out-file.txt").symlink_to(outside / "secret.txt")
    (root / "out-dir").symlink_to(outside, target_is_directory=True)
    (root / "in-file.txt").symlink_to(root / "real" / "a.txt")
    (root / "z-in-dir").symlink_to(root / "real", target_is_directory=True)
    (root / "real" / "loop").symlink_to(root, target_is_directory=True)
    report = ingest_paths([root], str(tmp_path / "s.db"))
    assert report.ingested == ["real/a.txt"] and not report.failures
    warned = {str(w.path): w.reason for w in report.warnings}
    assert set(warned) == {str(root / "out-file.txt"), str(root / "out-dir")}
    assert all("outside the folder: not followed" in reason for reason in warned.values())
    code, output = _ingest(str(root), "--db", str(tmp_path / "cli.db"))
    assert code == 0 and "out-dir: symlink to" in output and json.dumps(str(outside))[1:-1] in output


# -- #5 the known levels are configurable --------------------------------------------------------
def test_the_known_levels_come_from_ragspine_sensitivity_levels(tmp_path: Path) -> None:
    """#5: labels must belong to a known, configurable set; anything else is an ingest error."""
    env = {**BM25, "RAGSPINE_SENSITIVITY_LEVELS": "open, secret ,RESTRICTED"}
    with ragspine.open(tmp_path / "ws", env=env) as ws:
        ws.ingest("Canteen menu.", doc_id="a", sensitivity="Open")
        ws.ingest("Merger codename heron.", doc_id="b", sensitivity="ＳＥＣＲＥＴ")
        with pytest.raises(ValueError, match="'INTERNAL'.*OPEN, SECRET, RESTRICTED"):
            ws.ingest("Board notes.", doc_id="c", sensitivity="INTERNAL")
        with pytest.raises(ValueError, match="'INTERNAL' \\(from the default label.*give it a sensitivity"):
            ws.ingest("Board notes.", doc_id="d")  # nothing labels it, and INTERNAL is no level here
        labels = {c.doc_id: c.sensitivity for c in ws.store.iter_chunks()}
    assert labels == {"a": "OPEN", "b": "SECRET"}
    with pytest.raises(ConfigError, match="RESTRICTED must be the last"):
        load_settings({"RAGSPINE_SENSITIVITY_LEVELS": "RESTRICTED,PUBLIC"})
