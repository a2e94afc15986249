"""HNSW libraries side by side on the same vectors: build time, query p50/p95, recall@10 (issue 20).

Run: `PYTHONPATH=. .venv/bin/python -m bench.ann_libraries LIBRARY N [EF_SEARCH]` with LIBRARY one
of faiss (IndexHNSWFlat), faisssq (IndexHNSWSQ 8-bit, what the dense channel uses), hnswlib,
usearch (f32), usearch16 (f16), usearchi8 (i8); `make bench-ann` runs them at 20k. Vectors: N
clustered 384-d unit vectors (N/100 centres + N(0, 0.6) noise), 200 queries drawn the same way,
exact top 10 by brute force; M = 16, ef_construction = 100, 2 build threads, 1 search thread,
one query per call. Needs `pip install faiss-cpu hnswlib usearch` (benchmark only).
"""
import sys
import time

import numpy as np

lib, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
d=384
centres = rng.standard_normal((max(10,n//100), d)).astype(np.float32)
x = centres[rng.integers(0, len(centres), n)] + 0.6*rng.standard_normal((n, d)).astype(np.float32)
x /= np.linalg.norm(x, axis=1, keepdims=True)
q = centres[rng.integers(0, len(centres), 200)] + 0.6*rng.standard_normal((200, d)).astype(np.float32)
q /= np.linalg.norm(q, axis=1, keepdims=True)
exact = np.argsort(-(q @ x.T), axis=1)[:, :10]
M, efc, ef = 16, 100, int(sys.argv[3]) if len(sys.argv)>3 else 64
t=time.perf_counter()
if lib=="usearch":
    from usearch.index import Index
    idx = Index(ndim=d, metric="ip", dtype="f32", connectivity=M, expansion_add=efc, expansion_search=ef)
    idx.add(np.arange(n), x, threads=2)
    def search(v): return idx.search(v, 10, exact=False).keys
elif lib=="usearch16":
    from usearch.index import Index
    idx = Index(ndim=d, metric="ip", dtype="f16", connectivity=M, expansion_add=efc, expansion_search=ef)
    idx.add(np.arange(n), x, threads=2)
    def search(v): return idx.search(v, 10, exact=False).keys
elif lib in ("usearchi8",):
    from usearch.index import Index
    idx = Index(ndim=d, metric="ip", dtype="i8", connectivity=M, expansion_add=efc, expansion_search=ef)
    idx.add(np.arange(n), x, threads=2)
    def search(v): return idx.search(v, 10, exact=False).keys
elif lib=="faisssq":
    import faiss
    faiss.omp_set_num_threads(2)
    idx = faiss.IndexHNSWSQ(d, faiss.ScalarQuantizer.QT_8bit, M, faiss.METRIC_INNER_PRODUCT); idx.hnsw.efConstruction=efc
    idx.train(x[:20000]); idx.add(x); idx.hnsw.efSearch=ef; faiss.omp_set_num_threads(1)
    def search(v): return idx.search(v[None], 10)[1][0]
elif lib=="hnswlib":
    import hnswlib
    idx = hnswlib.Index(space="ip", dim=d); idx.init_index(max_elements=n, M=M, ef_construction=efc)
    idx.set_num_threads(2); idx.add_items(x, np.arange(n)); idx.set_ef(ef); idx.set_num_threads(1)
    def search(v): return idx.knn_query(v, 10)[0][0]
elif lib=="faiss":
    import faiss
    faiss.omp_set_num_threads(2)
    idx = faiss.IndexHNSWFlat(d, M, faiss.METRIC_INNER_PRODUCT); idx.hnsw.efConstruction=efc
    idx.add(x); idx.hnsw.efSearch=ef; faiss.omp_set_num_threads(1)
    def search(v): return idx.search(v[None], 10)[1][0]
build=time.perf_counter()-t
lat=[]; rec=[]
for i in range(len(q)):
    t=time.perf_counter(); k=search(q[i]); lat.append(time.perf_counter()-t)
    rec.append(len(set(np.asarray(k).tolist()) & set(exact[i].tolist()))/10)
print(f"{lib} n={n} ef={ef} build {build:.1f}s p50 {np.percentile(lat,50)*1e3:.3f}ms p95 {np.percentile(lat,95)*1e3:.3f}ms recall {np.mean(rec):.4f}", flush=True)
