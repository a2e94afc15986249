"""Human-readable rendering of an EvalReport (the --json object is `EvalReport.to_dict`)."""

from __future__ import annotations

from ragspine.eval.metrics import MRR_K, NDCG_K, RECALL_K
from ragspine.eval.runner import WHOLE, EvalReport


def format_report(report: EvalReport) -> str:
    """A short settings block and a metrics table.

    >>> from ragspine.eval.runner import EvalReport
    >>> r = EvalReport("toy", "test", "bm25", "auto: no embedding backend (--embedding none)",
    ...     None, "none", "spec", "spec: requested", "whole", False, 100, ":memory:", False, 3, 3, 2, 0, 0,
    ...     0.75, 1.0, 0.5, 0.1, 0.5)
    >>> print(format_report(r))  # doctest: +NORMALIZE_WHITESPACE
    ragspine eval  toy / test  (--whole-entries: not the product path)
      mode      bm25 (auto: no embedding backend (--embedding none))
      analyzer  spec (spec: requested)
      chunking  whole documents (one chunk per corpus entry); glossary rewriter off
      store     :memory:, ingested 3 docs -> 3 chunks in 0.1 s
      queries   2 judged, top-k 100
    <BLANKLINE>
      metric      value
      nDCG@10     0.7500
      Recall@100  1.0000
      MRR@10      0.5000
      queries/s   4.0
    """
    chunking = (
        "whole documents (one chunk per corpus entry)"
        if report.chunking == WHOLE
        else f"{report.chunking} (max/overlap chars)"
    )
    store = (
        f"{report.db}, reused: ingest skipped ({report.docs} docs, {report.chunks} chunks)"
        if report.reused_store
        else f"{report.db}, ingested {report.docs} docs -> {report.chunks} chunks in {report.ingest_s:.1f} s"
    )
    if report.path == "product":
        return _format_product(report)
    queries = f"{report.queries} judged, top-k {report.top_k}" + _query_notes(report)
    lines = [
        f"ragspine eval  {report.dataset} / {report.split}  (--whole-entries: not the product path)",
        f"  mode      {report.mode} ({report.mode_note})",
        *(
            [f"  dense     {report.embedding}; fusion {report.fusion}; embedded {report.embedded} now ({report.embed_s:.1f} s)"]
            if report.embedding
            else []
        ),
        f"  analyzer  {report.analyzer} ({report.analyzer_note})",
        f"  chunking  {chunking}; glossary rewriter {'on' if report.glossary else 'off'}",
        f"  store     {store}",
        f"  queries   {queries}",
        "",
        *_metrics(report),  # no ms/query line: only the product path times its queries
    ]
    return "\n".join(lines)


PRODUCT_PATH = (
    "the product's: corpus entries as files (title, blank line, text) -> ragspine ingest -> ragspine.open(db).search"
)


def _metrics(report: EvalReport) -> list[str]:
    return [
        "  metric      value",
        f"  {'nDCG@' + str(NDCG_K):<11} {report.ndcg:.4f}",
        f"  {'Recall@' + str(RECALL_K):<11} {report.recall:.4f}",
        f"  {'MRR@' + str(MRR_K):<11} {report.mrr:.4f}",
        f"  {'queries/s':<11} {report.queries_per_s:.1f}",
        *([f"  {'ms/query':<11} p50 {report.latency_ms[0]:.1f}, p95 {report.latency_ms[1]:.1f}"]
          if report.latency_ms else []),
    ]


def _format_product(report: EvalReport) -> str:
    """The product run: the path, every product setting it used, the store, the metrics."""
    if report.reused_store:
        store = f"{report.db}, reused: ingest skipped ({report.docs} entries, {report.chunks} chunks)"
    else:
        store = (
            f"{report.db}, ingested {report.docs - report.empty_entries} files -> {report.chunks} chunks "
            f"in {report.ingest_s:.1f} s"
        )
        if report.embedding:
            store += f"; embedded {report.embedded} chunks in {report.embed_s:.1f} s"
    if report.empty_entries:
        store += f"; {report.empty_entries} empty entries not ingested"
    queries = f"{report.queries} judged, top-k {report.top_k} entries, each ranked by its best snippet"
    queries += _query_notes(report)
    width = max((len(k) for k in report.settings), default=0)
    lines = [
        f"ragspine eval  {report.dataset} / {report.split}",
        f"  path      {PRODUCT_PATH}",
        f"  mode      {report.mode} ({report.mode_note})",
        "  settings",
        *(f"    {k:<{width}}  {v}" for k, v in report.settings.items()),
        f"  store     {store}",
        f"  queries   {queries}",
        "",
        *_metrics(report),
    ]
    return "\n".join(lines)


def _query_notes(report: EvalReport) -> str:
    """The blank queries and the judged doc ids the corpus lacks, each as "; …", when any."""
    notes = f"; {report.blank_queries} blank (empty ranking, scored 0)" if report.blank_queries else ""
    if report.unknown_judged_docs:
        notes += f"; {report.unknown_judged_docs} judged doc id(s) not in the corpus"
    return notes
