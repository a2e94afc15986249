"""What an ingest run did, and its closing summary table.

Invariant: every file the run considered lands in exactly one of `ingested`, `unchanged` or
`failures`; a run stopped by a full storage counts the files it never considered in
`not_attempted` (the file it stopped at is a failure); `withdrawn` lists documents `--prune`
took out of the active set; `warnings` say what was ingested (or skipped) but deserves a look (a
kept stricter label, garbled text, a near-miss sidecar name, a symlink not followed), one per
line in the summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragspine.ingest.files import FileFailure


@dataclass
class IngestReport:
    """Counts and names from one ingest run."""

    db: str
    ingested: list[str] = field(default_factory=list)  # new or changed: a new version written
    changed: list[str] = field(default_factory=list)  # the subset of `ingested` seen before
    unchanged: list[str] = field(default_factory=list)  # skipped: same content and settings
    withdrawn: list[str] = field(default_factory=list)  # pruned: their files are gone
    failures: list[FileFailure] = field(default_factory=list)
    warnings: list[FileFailure] = field(default_factory=list)  # (path, what to look at)
    chunks: int = 0  # chunks written by this run
    unchanged_chunks: int = 0  # active chunks of the unchanged documents
    bytes_read: int = 0
    not_attempted: int | None = None  # None: the run went through; a count: it stopped (a full disk)

    def summary_table(self) -> str:
        """The closing table: documents and chunks per outcome."""
        rows = [
            ("ingested", len(self.ingested), str(self.chunks)),
            ("unchanged", len(self.unchanged), str(self.unchanged_chunks)),
            ("failed", len(self.failures), "-"),
            ("withdrawn", len(self.withdrawn), "-"),
        ]
        lines = [f"{'':<10} {'documents':>9} {'chunks':>8}"]
        lines += [f"{name:<10} {count:>9} {chunks:>8}" for name, count, chunks in rows]
        if self.warnings:
            lines.append(f"warnings: {len(self.warnings)}")
            lines += [f"  {warning.path}: {warning.reason}" for warning in self.warnings]
        return "\n".join(lines)

    def headline(self) -> str:
        """One line: what was written where, and how many failed."""
        return (
            f"ingested {len(self.ingested)} document(s), {self.chunks} chunk(s) into {self.db}; "
            f"unchanged: {len(self.unchanged)}; withdrawn: {len(self.withdrawn)}; "
            f"failed: {len(self.failures)}"
            + (f"; stopped (storage full), not attempted: {self.not_attempted}" if self.stopped else "")
        )

    @property
    def stopped(self) -> bool:
        """Whether a full storage stopped the run before its end."""
        return self.not_attempted is not None
