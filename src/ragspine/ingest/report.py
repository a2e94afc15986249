"""What an ingest run did, and its closing summary table.

Invariant: every file the run considered lands in exactly one of `ingested`, `unchanged`,
`duplicates` (a copy of a stored document, recorded, not stored again: `duplicate_of` names it) or
`failures`; `known_failures` are the failures the previous run had too (same file, same reason);
`exit_status` is 0 when there is no failure, or (not `strict`) when every failure is a known one
and the run went through; a run stopped by a full storage counts the files it never considered in
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
    duplicates: list[str] = field(default_factory=list)  # copies of a stored document, not stored again
    duplicate_of: dict[str, str] = field(default_factory=dict)  # a duplicate's doc_id: the stored one's
    withdrawn: list[str] = field(default_factory=list)  # pruned: their files are gone
    failures: list[FileFailure] = field(default_factory=list)
    known_failures: list[FileFailure] = field(default_factory=list)  # the subset the previous run had too
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
            ("duplicate", len(self.duplicates), "-"),
            ("failed", len(self.failures), "-"),
            ("withdrawn", len(self.withdrawn), "-"),
        ]
        lines = [f"{'':<10} {'documents':>9} {'chunks':>8}"]
        lines += [f"{name:<10} {count:>9} {chunks:>8}" for name, count, chunks in rows]
        lines += [f"duplicate: {doc_id} (a copy of {self.duplicate_of.get(doc_id, '?')})" for doc_id in self.duplicates]
        if self.warnings:
            lines.append(f"warnings: {len(self.warnings)}")
            lines += [f"  {warning.path}: {warning.reason}" for warning in self.warnings]
        if self.known_failures:
            lines.append(f"known failures (the same as the last run): {len(self.known_failures)}")
            lines += [f"  {failure.path}: {failure.reason}" for failure in self.known_failures]
        return "\n".join(lines)

    @property
    def new_failures(self) -> list[FileFailure]:
        """The failures the previous run did not have (a new file, or a new reason)."""
        known = {(failure.path, failure.reason) for failure in self.known_failures}
        return [failure for failure in self.failures if (failure.path, failure.reason) not in known]

    def exit_status(self, *, strict: bool = False) -> int:
        """0 when every file that could be read was read and each failure is a known one (never
        with `strict`, or a run stopped by a full storage, while anything failed); else 1."""
        if not self.failures:
            return 0
        return 1 if strict or self.stopped or self.new_failures else 0

    def exit_line(self, *, strict: bool = False) -> str:
        """What the exit status says, and why (the summary's last line)."""
        status = self.exit_status(strict=strict)
        if not self.failures:
            return "exit 0: no failure"
        if strict:
            return f"exit 1: {len(self.failures)} failure(s) (--strict: any failure fails the run)"
        if status:
            return (
                f"exit 1: {len(self.new_failures)} new failure(s) since the last run"
                + ("; stopped before the end" if self.stopped else "")
            )
        return (
            f"exit 0: the {len(self.failures)} failure(s) are the same as the last run's (listed above; "
            "--strict fails on them)"
        )

    def headline(self) -> str:
        """One line: what was written where, and how many failed."""
        return (
            f"ingested {len(self.ingested)} document(s), {self.chunks} chunk(s) into {self.db}; "
            f"unchanged: {len(self.unchanged)}; withdrawn: {len(self.withdrawn)}; "
            f"failed: {len(self.failures)}"
            + (f"; duplicates: {len(self.duplicates)}" if self.duplicates else "")
            + (f"; stopped (storage full), not attempted: {self.not_attempted}" if self.stopped else "")
        )

    @property
    def stopped(self) -> bool:
        """Whether a full storage stopped the run before its end."""
        return self.not_attempted is not None
