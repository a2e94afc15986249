"""A throw-away PostgreSQL (with pgvector) on 127.0.0.1 from the `pgserver` wheel, for tests and benchmarks.

The server binaries come from the `pgserver` wheel (PostgreSQL + pgvector in a PyPI package, in
the `test` extra), so a fresh machine needs only `pip install -e '.[test]'`. `LocalPostgres`
runs the bundled `initdb` / `postgres` itself: a throw-away data folder, a free TCP port on
127.0.0.1, no Unix socket, fsync off (never for data you keep). PostgreSQL refuses to run as
root, so under root (CI) both run as `nobody` in a data folder it owns (and from a copy of the
binaries when the installed ones are not reachable by other users).

Invariant: `start()` returns only once the server accepts connections, else raises with the
server's log; `stop()` and `remove()` are idempotent, and the context manager does both.

    with LocalPostgres() as url:      # postgresql://postgres@127.0.0.1:PORT/postgres
        ...
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

START_TIMEOUT_S = 60.0
RUN_AS = "nobody"


def _bundled_bin() -> Path:
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "a local PostgreSQL needs the `pgserver` wheel: pip install -e '.[test]' "
            "(or point RAGSPINE_TEST_POSTGRES_URL at a server you run)"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise RuntimeError(f"pgserver is installed but has no PostgreSQL binaries at {bin_dir}")
    return bin_dir


def _reachable_by_others(path: Path) -> bool:
    """Whether every folder above `path` lets other users through (o+x)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"postgres exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with psycopg.connect(url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not accept connections:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)


class LocalPostgres:
    """initdb + postgres from the bundled binaries, as `nobody` when we are root."""

    def __init__(self, max_connections: int = 50) -> None:
        self.max_connections = max_connections
        self.root = Path(tempfile.mkdtemp(prefix="ragspine-pg-"))
        self.root.chmod(0o755)
        bin_dir = _bundled_bin()
        as_root = os.geteuid() == 0
        if as_root and not _reachable_by_others(bin_dir):
            # Copy what `nobody` must read, keeping the layout the binaries' RPATH expects
            # ($ORIGIN/../../../pgserver.libs).
            site, copy = bin_dir.parents[2], self.root / "site"
            shutil.copytree(bin_dir.parent, copy / "pgserver" / "pginstall", symlinks=True)
            if (site / "pgserver.libs").is_dir():
                shutil.copytree(site / "pgserver.libs", copy / "pgserver.libs", symlinks=True)
            for folder in [copy, *(p for p in copy.rglob("*") if p.is_dir())]:
                folder.chmod(0o755)
            bin_dir = copy / "pgserver" / "pginstall" / "bin"
        self.bin = bin_dir
        self.data = self.root / "data"
        self.data.mkdir(mode=0o700)
        self.user: dict[str, object] = {}
        if as_root:
            entry = pwd.getpwnam(RUN_AS)
            os.chown(self.data, entry.pw_uid, entry.pw_gid)
            self.user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        self.log = self.root / "postgres.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> str:
        initdb = subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync"],
            cwd=self.root, capture_output=True, text=True, **self.user,  # type: ignore[call-overload]
        )  # fmt: skip
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed ({initdb.returncode}):\n{initdb.stdout}\n{initdb.stderr}")
        for attempt in range(3):
            port = free_port()
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen(
                    [str(self.bin / "postgres"), "-D", str(self.data), "-h", "127.0.0.1",
                     "-p", str(port), "-k", "", "-c", "fsync=off", "-c", "synchronous_commit=off",
                     "-c", "full_page_writes=off", "-c", f"max_connections={self.max_connections}"],
                    cwd=self.root, stdout=log, stderr=subprocess.STDOUT, **self.user,  # type: ignore[call-overload]
                )  # fmt: skip
            self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            try:
                _wait_ready(self.url, self.proc, self.log)
                return self.url
            except RuntimeError:
                if attempt == 2 or "could not bind" not in self.log.read_text():
                    raise
                self.stop()  # the port was taken between choosing and binding it: try another
        raise AssertionError("unreachable")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.stop()
            self.remove()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        self.remove()
