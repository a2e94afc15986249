"""make_vector_store: names from the registry, options from the constructors, RAGSPINE_VECTOR_STORE."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

from ragspine.settings import config
from ragspine.settings.config import ConfigError
from ragspine.retrieval.vector.stores import factory
from ragspine.retrieval.vector.stores.factory import VECTOR_STORES, StoreEntry, make_vector_store
from ragspine.retrieval.vector.stores.inprocess import InProcessVectorStore, VectorStore


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAGSPINE_VECTOR_STORE", "RAGSPINE_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def test_the_registry_is_what_the_setting_accepts() -> None:
    assert tuple(VECTOR_STORES) == config.VECTOR_STORES == ("in_process", "pgvector", "qdrant")
    setting = next(s for s in config.SETTINGS if s.env == "RAGSPINE_VECTOR_STORE")
    assert setting.default == "in_process" and config.Settings().vector_store == "in_process"
    where = {"in_process": {}, "pgvector": {"RAGSPINE_VECTOR_URL": "postgresql://u@h/db"},
             "qdrant": {"RAGSPINE_VECTOR_URL": "http://127.0.0.1:6333"}}  # fmt: skip
    for name in VECTOR_STORES:
        assert config.load_settings({"RAGSPINE_VECTOR_STORE": name, **where[name]}).vector_store == name


def test_a_bad_setting_is_a_config_error_listing_the_names() -> None:
    with pytest.raises(ConfigError, match=r"RAGSPINE_VECTOR_STORE='faiss'.*in_process.*pgvector.*qdrant"):
        config.load_settings({"RAGSPINE_VECTOR_STORE": "faiss"})


def test_the_default_is_the_in_process_store() -> None:
    store = make_vector_store()
    assert isinstance(store, InProcessVectorStore) and isinstance(store, VectorStore)
    assert make_vector_store(" In_Process ", dim=4, model_id="m").dim == 4


def test_none_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("qdrant_client")
    monkeypatch.setenv("RAGSPINE_VECTOR_STORE", "qdrant")
    store = make_vector_store(collection="c", dim=3, location=":memory:", model_id="m")
    assert type(store).__name__ == "QdrantVectorStore" and isinstance(store, VectorStore)
    store.upsert(["a"], [[1.0, 0.0, 0.0]], [{"doc_id": "d"}])
    assert store.query([1.0, 0.0, 0.0], k=1) == [("a", 1.0)]
    store.close()  # type: ignore[attr-defined]


def test_unknown_names_list_the_registry() -> None:
    with pytest.raises(ValueError, match=r"unknown vector store 'faiss'; valid: in_process, pgvector, qdrant$"):
        make_vector_store("faiss")
    with pytest.raises(ValueError, match="must be a string or None"):
        make_vector_store(3)  # type: ignore[arg-type]


def test_unknown_and_missing_options_come_from_the_constructor() -> None:
    with pytest.raises(ValueError, match=r"'in_process': unknown option\(s\) url; valid: dim, model_id$"):
        make_vector_store("in_process", url="x")
    with pytest.raises(ValueError, match=r"'pgvector': unknown option\(s\) collection; valid: url, table, dim"):
        make_vector_store("pgvector", collection="x")
    with pytest.raises(ValueError, match=r"'pgvector' needs the option\(s\) url, table, dim$"):
        make_vector_store("pgvector")


def test_pgvector_is_registered_and_lazily_imported() -> None:
    entry = VECTOR_STORES["pgvector"]
    assert entry.target == "ragspine.retrieval.vector.stores.pgvector:PgVectorStore"
    assert entry.load("pgvector").__name__ == "PgVectorStore"


def test_a_registered_module_that_is_missing_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = dict(VECTOR_STORES)
    registry["pgvector"] = StoreEntry("ragspine.retrieval.vector.no_such_store:PgVectorStore", "gone")
    monkeypatch.setattr(factory, "VECTOR_STORES", registry)
    with pytest.raises(ImportError, match=r"'pgvector' is registered, but its module .*no_such_store is not part"):
        make_vector_store("pgvector", url="postgresql://x", table="t", dim=3)


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "qdrant_client" or m.startswith("qdrant_client.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "qdrant_client", None)  # type: ignore[arg-type]
    with pytest.raises(ImportError, match=r"pip install 'ragspine\[qdrant\]'"):
        make_vector_store("qdrant", location=":memory:")


def test_importing_the_factory_imports_no_driver() -> None:
    code = ("import sys; import ragspine.retrieval.vector.stores.factory; "
            "print(sorted(m for m in ('qdrant_client', 'psycopg', 'pgvector') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_docstring_examples() -> None:
    failures, _ = doctest.testmod(factory, optionflags=doctest.ELLIPSIS)
    assert failures == 0
