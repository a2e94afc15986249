"""Build or update a store's RAPTOR tree from its chunk vectors.

Invariants:
- the leaves are the store's active chunks that are not RESTRICTED and have a vector; a
  RESTRICTED chunk is never a member, so its text never reaches a summary or a summary prompt;
- level 1 clusters the leaves, level L+1 clusters the nodes of level L (`update_clusters`,
  deterministic), up to `levels` or until a level has fewer than two nodes;
- an update touches only the clusters a change reaches: leaves gone (withdrawn, replaced,
  relabelled RESTRICTED) leave their clusters, new leaves join one; only touched clusters get a
  new summary, and a changed node is re-placed one level up; the tree records the store's
  data_version it was built from. A full build (or a change of settings or model) starts empty.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ragspine.retrieval.model import Chunk
from ragspine.retrieval.raptor.cluster import centroid, update_clusters
from ragspine.retrieval.raptor.summary import Summarizer
from ragspine.retrieval.raptor.tree import Leaf, Node, RaptorTree
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.store.protocol import ChunkReader
from ragspine.retrieval.vector.dense.channel import language_code

VectorLookup = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]
DEFAULT_THRESHOLD = 0.3  # a cosine of language-centred vectors (see `language_centres`)
DEFAULT_MAX_CLUSTER = 8
DEFAULT_LEVELS = 3
MIN_CENTRED_LEAVES = 20
MIN_LANGUAGE_LEAVES = 10


@dataclass(frozen=True)
class RaptorConfig:
    """How the tree is clustered (changing any of it makes the next build a full one)."""

    threshold: float = DEFAULT_THRESHOLD
    max_cluster: int = DEFAULT_MAX_CLUSTER
    levels: int = DEFAULT_LEVELS

    def __post_init__(self) -> None:
        if not -1.0 <= self.threshold <= 1.0:
            raise ValueError(f"RAPTOR threshold is a cosine in [-1, 1], got {self.threshold}")
        if self.max_cluster < 2 or self.levels < 1:
            raise ValueError(f"RAPTOR needs max_cluster >= 2 and levels >= 1, got {self.max_cluster}, {self.levels}")


@dataclass(frozen=True)
class BuildReport:
    """What one build did."""

    full: bool
    data_version: int
    leaves: int
    without_vector: int
    nodes: dict[int, int] = field(default_factory=dict)  # level -> nodes after the build
    summarised: int = 0  # nodes (re)summarised by this build
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_tree(
    store: ChunkReader,
    vectors: VectorLookup,
    tree: RaptorTree,
    summarizer: Summarizer,
    config: RaptorConfig = RaptorConfig(),
    *,
    model_id: str = "",
    full: bool = False,
) -> BuildReport:
    """Bring `tree` up to date with `store` (incrementally unless `full` or the settings changed)."""
    started = time.perf_counter()
    version = store.data_version()
    settings = {**asdict(config), "model_id": model_id}
    full = full or tree.meta.get("settings") != settings
    if full:
        tree.clusters, tree.nodes = {}, {}
    leaves = _read_leaves(store, vectors, tree, full)
    member_vectors = leaves.vectors
    changed: set[str] = set()  # members whose content changed (nodes re-summarised below)
    written: set[str] = set()
    summarised = 0
    ids = _NodeIds(int(tree.meta.get("next_id", 0)))
    for level in range(1, config.levels + 1):
        touched, changed = _update_level(tree, level, member_vectors, changed, leaves.chunks, summarizer, config, ids)
        written |= touched
        summarised += len(changed)
        member_vectors = _node_vectors(tree, level)
    written |= _drop_levels_above(tree, config.levels)
    seconds = time.perf_counter() - started
    nodes = {lv: sum(1 for n in tree.nodes.values() if n.level == lv) for lv in sorted(tree.clusters)}
    meta = {"data_version": version, "settings": settings, "next_id": ids.last, "seconds": round(seconds, 3),
            "centres": tree.meta["centres"],
            "summarizer": type(summarizer).__name__, "leaves": len(leaves.vectors), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
    tree.save(written, meta, reset=full, languages=leaves.languages)
    return BuildReport(full, version, len(leaves.vectors), len(leaves.chunks) - len(leaves.vectors), nodes, summarised, seconds)


@dataclass(frozen=True)
class _Leaves:
    """The tree's would-be leaves: the readable chunks, the centred vectors of those that have
    one (the level-1 members), and the language codes to record (None: a leaf gone)."""

    chunks: Mapping[str, Chunk]
    vectors: dict[str, np.ndarray]
    languages: dict[str, int | None]


def _read_leaves(store: ChunkReader, vectors: VectorLookup, tree: RaptorTree, full: bool) -> _Leaves:
    """The store's non-RESTRICTED chunks and their centred vectors; the tree's language centres
    are (re)computed here on a full build or when the tree has none yet."""
    chunks = {c.chunk_id: c for c in store.iter_chunks() if not is_restricted(c.sensitivity)}
    ids = sorted(chunks)
    rows, present = vectors(ids) if ids else (np.zeros((0, 0)), np.zeros(0, dtype=bool))
    kept = [i for i, cid in enumerate(ids) if present[i]]
    kept_ids = [ids[i] for i in kept]
    known = {} if full else tree.languages
    codes = _language_codes(kept_ids, chunks, known)
    languages: dict[str, int | None] = {c: int(code) for c, code in zip(kept_ids, codes.tolist()) if c not in known}
    languages.update({c: None for c in set(known) - set(kept_ids)})  # leaves gone
    if full or "centres" not in tree.meta:
        tree.meta["centres"] = language_centres(codes, rows[kept])
    centres = {int(k): np.asarray(v) for k, v in tree.meta["centres"].items()}
    member_vectors = dict(zip(kept_ids, centre_rows(rows[kept], codes, centres), strict=True))
    return _Leaves(chunks, member_vectors, languages)


def _language_codes(ids: Sequence[str], chunks: Mapping[str, Chunk], known: Mapping[str, int]) -> np.ndarray:
    """The language code of each chunk: the one the tree recorded, else `language_code` of its text."""
    return np.array([known[c] if c in known else language_code(chunks[c].text) for c in ids], dtype=np.int64)


class _NodeIds:
    """Fresh node ids `raptor:<level>:<n>`, numbered on from the tree's `next_id` (`last`)."""

    def __init__(self, last: int) -> None:
        self.last = last

    def maker(self, level: int) -> Callable[[], str]:
        """A function that returns the next id of `level`."""

        def make() -> str:
            self.last += 1
            return f"raptor:{level}:{self.last:07d}"

        return make


def _update_level(
    tree: RaptorTree,
    level: int,
    member_vectors: dict[str, np.ndarray],
    changed: set[str],
    chunks: Mapping[str, Chunk],
    summarizer: Summarizer,
    config: RaptorConfig,
    ids: _NodeIds,
) -> tuple[set[str], set[str]]:
    """Re-cluster one level for its members' arrivals, departures and `changed` contents, and
    re-summarise the touched clusters; returns (the touched cluster ids, the nodes re-summarised)."""
    clusters = tree.clusters.setdefault(level, {})
    before = {m for members in clusters.values() for m in members}
    now = set(member_vectors) if len(member_vectors) >= 2 else set()
    touched = update_clusters(
        clusters, member_vectors, remove=(before - now) | (changed & before), add=sorted((now - before) | (changed & now)),
        threshold=config.threshold, max_size=config.max_cluster, new_id=ids.maker(level),
    )  # fmt: skip
    resummarised: set[str] = set()
    for cid in sorted(touched):
        members = clusters.get(cid, [])
        if len(members) < 2:
            tree.nodes.pop(cid, None)
            continue
        tree.nodes[cid] = _node(cid, level, members, member_vectors, tree.nodes, chunks, summarizer)
        resummarised.add(cid)
    return touched, resummarised


def _node_vectors(tree: RaptorTree, level: int) -> dict[str, np.ndarray]:
    """The vectors of `level`'s nodes (clusters of two or more): the members of the level above."""
    return {cid: tree.nodes[cid].vector for cid, members in tree.clusters[level].items() if len(members) >= 2}


def _drop_levels_above(tree: RaptorTree, levels: int) -> set[str]:
    """Remove the clusters and nodes above `levels` and empty levels; returns the cluster ids removed."""
    removed: set[str] = set()
    for level in [lv for lv in tree.clusters if lv > levels]:  # levels no longer wanted
        removed |= set(tree.clusters.pop(level))
    for cid in [n for n, node in tree.nodes.items() if node.level > levels]:
        tree.nodes.pop(cid)
    tree.clusters = {level: clusters for level, clusters in tree.clusters.items() if clusters}
    return removed


def language_centres(codes: np.ndarray, rows: np.ndarray) -> dict[str, list[float]]:
    """The mean vector of each language's chunks ("-1": of all), as the tree stores them; a
    language (`language_code` of the chunk's text) with fewer than MIN_LANGUAGE_LEAVES chunks
    uses the overall mean, and a tree of fewer than MIN_CENTRED_LEAVES leaves is not centred.

    Clustering and node ranking use vectors minus their language's mean, re-normalised (as the
    dense channel does for a mixed-language corpus): raw embeddings of one language sit close
    together whatever they say, and would cluster by language instead of by topic.
    """
    if len(codes) < MIN_CENTRED_LEAVES:
        return {}  # too few vectors for a mean worth subtracting: plain cosine
    codes = np.asarray(codes)
    out = {"-1": np.asarray(rows, dtype=np.float64).mean(axis=0).tolist()}
    for code in sorted(set(codes.tolist())):
        if np.count_nonzero(codes == code) >= MIN_LANGUAGE_LEAVES:
            out[str(code)] = np.asarray(rows[codes == code], dtype=np.float64).mean(axis=0).tolist()
    return out


def centre_rows(rows: np.ndarray, codes: np.ndarray, centres: Mapping[int, np.ndarray]) -> np.ndarray:
    """Each row minus the mean of its language code (the overall mean for a language the tree
    has not seen), re-normalised (a row left at zero keeps its raw value); `rows` as float64
    unchanged when the tree has no centres."""
    out = np.asarray(rows, dtype=np.float64).copy()
    if not centres or not len(out):
        return out
    overall = centres.get(-1)
    means = np.zeros_like(out)
    for code in np.unique(codes).tolist():
        mean = centres.get(int(code), overall)
        if mean is not None:
            means[codes == code] = mean
    moved = out - means
    norms = np.linalg.norm(moved, axis=1)
    ok = norms > 0
    out[ok] = moved[ok] / norms[ok, None]
    return out


def centre(vector: np.ndarray, text: str, centres: Mapping[int, np.ndarray]) -> np.ndarray:
    """`vector` minus the mean of `text`'s language, re-normalised (`centre_rows` of one row)."""
    return centre_rows(np.asarray(vector)[None, :], np.array([language_code(text)]), centres)[0]


def _node(
    cid: str,
    level: int,
    members: list[str],
    vectors: dict[str, np.ndarray],
    nodes: dict[str, Node],
    chunks: Mapping[str, Chunk],
    summarizer: Summarizer,
) -> Node:
    if level == 1:
        leaf_ids = list(members)
        inputs = [chunks[m] for m in members]
    else:
        leaf_ids = list(dict.fromkeys(leaf.chunk_id for m in members for leaf in nodes[m].leaves))
        inputs = [chunks[c] for c in dict.fromkeys(s for m in members for s in nodes[m].sources) if c in chunks]
    summary = summarizer.summarize(inputs)
    leaves = tuple(
        Leaf(c.chunk_id, c.doc_id, c.title, c.source_locator, c.sensitivity)
        for c in (chunks[i] for i in leaf_ids if i in chunks)
    )
    return Node(cid, level, tuple(members), summary.text, centroid([vectors[m] for m in members]),
                leaves, summary.sources, summary.summarizer)  # fmt: skip
