"""A real PostgreSQL server for the tests: its own cluster in a temp dir, Unix socket only.

One cluster per pytest process, started on first use (``initdb`` + ``pg_ctl start``)
and stopped and removed when the session ends (``config.add_cleanup``, plus ``atexit``
for a run that dies first). PostgreSQL refuses to run as root, so under root (CI, this
machine) the server runs as the ``postgres`` user that Debian's package creates, in a
dir that user owns; otherwise as the current user. It listens on no TCP port
(``listen_addresses=''``): only a socket in the cluster's own dir, so parallel test runs
and a system cluster never collide. Trust authentication is safe there for the same
reason: the socket's dir is 0700 to the server's user (and root).

Without the binaries, psycopg or a user to run the server as, ``skip_reason()`` says
which prerequisite is missing, and the fixtures skip with it.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

PREREQUISITE_MISSING = "prerequisite missing:"


def find_bindir() -> Path | None:
    """PostgreSQL's server binaries: $LOOPSTATE_PG_BINDIR, Debian's newest, then $PATH."""
    explicit = os.environ.get("LOOPSTATE_PG_BINDIR")
    candidates = [explicit] if explicit else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        if (Path(candidate) / "initdb").is_file() and (Path(candidate) / "pg_ctl").is_file():
            return Path(candidate)
    return None


def server_user() -> pwd.struct_passwd | None:
    """Who runs the server: the current user, or ``postgres`` when we are root (None: nobody can)."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        return None


def skip_reason() -> str | None:
    """Why a real PostgreSQL cannot be had here, or None when it can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return f"{PREREQUISITE_MISSING} psycopg 3 is not installed (pip install -e '.[postgres]')"
    if find_bindir() is None:
        return (f"{PREREQUISITE_MISSING} PostgreSQL's server binaries (initdb, pg_ctl) were not found "
                "(apt-get install postgresql, or set LOOPSTATE_PG_BINDIR)")
    if server_user() is None:
        return f"{PREREQUISITE_MISSING} running as root with no `postgres` user to run the server as"
    return None


class Cluster:
    """A started cluster: ``dsn(dbname)`` for clients, ``new_database()`` for a clean one per test."""

    def __init__(self) -> None:
        bindir = find_bindir()
        user = server_user()
        assert bindir is not None and user is not None, skip_reason()
        self.bindir = bindir
        self.user = user
        # /tmp, not pytest's tmp_path: the server's user must be able to reach it, and the
        # socket's path must stay under the 107 bytes a Unix socket name allows.
        self.dir = Path(tempfile.mkdtemp(prefix="lspg-"))
        self.data = self.dir / "data"
        self.socket_dir = self.dir / "sock"
        self.socket_dir.mkdir()
        self.log = self.dir / "server.log"
        for path in (self.dir, self.socket_dir):
            os.chown(path, user.pw_uid, user.pw_gid)
            os.chmod(path, 0o700)
        self.superuser = user.pw_name
        self._names = itertools.count(1)
        self.stopped = False
        self._run("initdb", "-D", str(self.data), "-U", self.superuser, "--auth=trust", "--encoding=UTF8",
                  "--locale=C", "--no-sync")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start", "-o",
                  f"-k {self.socket_dir} -c listen_addresses='' -c max_connections=200")

    def _run(self, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / tool), *args]
        if os.geteuid() == 0:
            command = ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}", "--clear-groups",
                       "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.dir,
                                env={**os.environ, "LC_ALL": "C"})
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed ({result.returncode}): {result.stdout}{result.stderr}{log}")
        return result

    def dsn(self, dbname: str = "postgres") -> str:
        """A ``postgresql://`` URL to a database of this cluster, over its socket."""
        return f"postgresql://{self.superuser}@/{dbname}?host={self.socket_dir}"

    def new_database(self, prefix: str = "t") -> str:
        """A new, empty database's URL: each test gets its own, so none sees another's rows."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its dir; safe to call twice."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


_cluster: Cluster | None = None


def shared_cluster(config) -> Cluster:  # noqa: ANN001 (a pytest.Config)
    """The process's one cluster, started on first use and stopped when the session ends."""
    global _cluster
    if _cluster is None or _cluster.stopped:
        _cluster = Cluster()
        config.add_cleanup(_cluster.stop)
        atexit.register(_cluster.stop)
    return _cluster
