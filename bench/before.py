"""Another git revision's `ragspine` package, importable beside this one in the same process.

`load_before(ref, folder)` writes `src/ragspine` of `ref` (`git archive`) to
`folder/ragspine_before/`, with every `ragspine.` module path and `from ragspine import` in its
source renamed to `ragspine_before`, puts `folder` on `sys.path` and returns the package name.
Benchmarks use it to time the code before a change and after it side by side, interleaved in
one process (same load, same caches), instead of in two runs at different moments of a shared
machine. Its persisted files (a lexical index's identity names its module) never mix with
this revision's.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "ragspine_before"
_MODULE_PATH = re.compile(r"\bragspine(?=\.)|(?<=\bfrom )ragspine(?= import\b)")


def load_before(ref: str, folder: Path) -> str:
    """Extract and rename `ref`'s package under `folder` (once per ref), import it; its name."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref], check=True, capture_output=True, text=True)
    target = folder / commit.stdout.strip()[:12]
    package = target / NAME
    if not package.exists():
        git = ["git", "-C", str(ROOT), "archive", ref, "src/ragspine"]
        archive = subprocess.run(git, check=True, capture_output=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            for member in tar.getmembers():
                if not member.isfile():
                    continue
                path = package / Path(member.name).relative_to("src/ragspine")
                path.parent.mkdir(parents=True, exist_ok=True)
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                if path.suffix == ".py":
                    data = _MODULE_PATH.sub(NAME, data.decode("utf-8")).encode("utf-8")
                path.write_bytes(data)
    sys.path.insert(0, str(target))
    __import__(NAME)
    return NAME
