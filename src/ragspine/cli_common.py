"""What every `ragspine` command module shares: the one-line error guard, the --db and --config
options and the opening of an existing store.

Invariants: bad input (a library ValueError, a config error, a missing extra, a full disk) leaves
a command as one line and exit 1, never a traceback; --db takes what `ragspine.open` takes (an
existing folder stands for its `chunks.db`; else a store file or a postgresql:// URL); a command that reads a store
refuses a path with no store instead of creating an empty one. Imports only click at load.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ragspine.retrieval.store.full import storage_full
from ragspine.retrieval.store.sqlite import NotAChunkStoreError
from ragspine.secret import redact_text
from ragspine.settings.config import ConfigError

if TYPE_CHECKING:
    from ragspine.settings.config import Settings
    from ragspine.workspace import Workspace



def store_file(db: str | None) -> str | None:
    """`db` as `ragspine.open` reads it: an existing folder stands for the `chunks.db` in it;
    anything else (a store file, a new path, ":memory:", a URL, None) as given."""
    if db is None or not Path(db).is_dir():
        return db
    from ragspine.workspace import store_path

    return store_path(db)


def db_value(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    """A --db option's callback: its value through `store_file`."""
    return store_file(value)


db_option = click.option(
    "--db", default=None, callback=db_value,
    help="Chunk store file, or a folder holding chunks.db [env RAGSPINE_DB; default .ragspine/chunks.db].",
)  # fmt: skip
config_option = click.option(
    "--config", "config_file", default=None, type=click.Path(dir_okay=False, path_type=Path),
    help="TOML settings file [env RAGSPINE_CONFIG]; the environment and flags override it.",
)  # fmt: skip


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the library's input errors, and a full disk, into a clean CLI error (exit 1)."""
    try:
        yield
    except (ValueError, ConfigError, NotAChunkStoreError, PermissionError) as exc:
        raise click.ClickException(redact_text(str(exc))) from exc
    except (ImportError, RuntimeError) as exc:
        # imported here: the backends' module is not needed to start the CLI
        from ragspine.extras import MissingExtraError
        from ragspine.retrieval.vector.embeddings.support import EmbeddingBackendError

        if isinstance(exc, MissingExtraError | EmbeddingBackendError):
            raise click.ClickException(redact_text(str(exc))) from exc
        raise
    except Exception as exc:
        full = storage_full(exc)  # a full disk, outside an ingest run's files: one line too
        if full is None:
            raise
        raise click.ClickException(str(full)) from exc


def existing_store(db: str) -> str:
    """The store file `db` names (`store_file`); ValueError when there is none (":memory:" and
    URLs pass as given)."""
    path = str(store_file(db))
    if path != ":memory:" and "://" not in path and not Path(path).is_file():
        raise ValueError(f"no chunk store at {path}; create one with `ragspine ingest PATH --db {path}`")
    return path


@contextmanager
def store_workspace(settings: Settings) -> Iterator[Workspace]:
    """The Workspace over the existing store RAGSPINE_DB names (`existing_store`), closed after."""
    from ragspine.workspace import Workspace

    with Workspace.from_settings(replace(settings, db=existing_store(settings.db))) as workspace:
        yield workspace
