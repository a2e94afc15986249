"""The lexical channel's inverted BM25 index: exact, incremental, persisted beside the store.

Modules, each with one job:
- `strings`: compact string columns and term vocabularies (dict, or sorted 64-bit hashes);
- `segment`: immutable term-major postings segments, built in batches;
- `merge`: one segment from several, optionally dropping positions (compaction);
- `scoring`: BM25 numerics as small pure numpy functions, exact top-k (MaxScore pruning);
- `termcache`: prepared query terms and their contributions, per snapshot;
- `snapshot`: an immutable index over segments with tombstones and live N / df / avgdl;
- `storage`: segment folders, tombstone records and the manifest on disk, checksummed;
- `identity`: which analyzer built an index;
- `store_index`: keeping a snapshot in step with a ChunkStore (load, catch up, rebuild),
  reading it only through the store's `ChangeLog` Protocol (change log, snapshot, rows by id).

Invariant of the package: for any sequence of ingests, replacements and withdrawals, the scores
of the index equal `bm25.bm25_scores` over the store's active chunks (to float rounding).
"""
