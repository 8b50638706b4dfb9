"""A throwaway PostgreSQL cluster for the tests and the ledger benchmark.

``initdb`` and ``pg_ctl`` on a temporary directory; the server listens on a unix socket in that
directory only (``listen_addresses=''``: no TCP port, so parallel sessions on one machine never
collide), trusts local connections, and skips durability (``fsync=off``): the data is thrown away.

PostgreSQL refuses to run as root. When the tests run as root, the cluster runs as an unprivileged
system user: ``postgres`` when the distribution's package made one, else ``toolstitch-pg``, created
here with ``useradd --system``. The binaries are found on ``PATH`` or in
``/usr/lib/postgresql/<version>/bin`` (Debian and Ubuntu put them there); :func:`find_bindir`
returns None when there are none, and the tests skip with that reason.

This module lives beside the tests, not in the package: it starts servers and creates system users,
which a library must never do on import. The benchmark imports it as ``tests.pg_cluster`` with the
repository root on ``sys.path``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["Cluster", "find_bindir"]

SUPERUSER = "toolstitch"
_SERVICE_USERS = ("postgres", "toolstitch-pg")


def find_bindir() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or None."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []

    def version(path: str) -> tuple[int, ...]:
        match = re.search(r"/postgresql/([\d.]+)/bin", path)
        return tuple(int(p) for p in match.group(1).split(".") if p) if match else (0,)

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    for directory in candidates:
        if all((directory / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return directory
    return None


def _service_user() -> pwd.struct_passwd:
    """An unprivileged account to run the server as (root only)."""
    for name in _SERVICE_USERS:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "toolstitch-pg"],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam("toolstitch-pg")


class Cluster:
    """One PostgreSQL server on a unix socket in a temporary directory.

    ``start()`` runs ``initdb`` (trust auth, superuser ``toolstitch``) and ``pg_ctl start``;
    ``restart()`` and ``stop()`` are ``pg_ctl``'s; ``create_database(name)`` makes a fresh database;
    ``conninfo(dbname)`` is what psycopg connects with. Use it as a context manager.
    """

    def __init__(self, bindir: Path | None = None) -> None:
        found = bindir or find_bindir()
        if found is None:
            raise FileNotFoundError("no PostgreSQL binaries (initdb, pg_ctl, postgres) were found")
        self.bindir = found
        self.root: Path | None = None
        self._account: pwd.struct_passwd | None = None
        self._options = ""

    # -- paths -----------------------------------------------------------------------------------

    @property
    def socket_dir(self) -> Path:
        assert self.root is not None, "the cluster is not started"
        return self.root

    @property
    def data_dir(self) -> Path:
        return self.socket_dir / "data"

    def conninfo(self, dbname: str = "postgres") -> str:
        """A libpq connection string for ``dbname`` over the cluster's unix socket."""
        return f"host={self.socket_dir} port=5432 dbname={dbname} user={SUPERUSER} connect_timeout=5"

    # -- running the tools -------------------------------------------------------------------------

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        options: dict[str, Any] = {}
        if self._account is not None:
            options = {"user": self._account.pw_uid, "group": self._account.pw_gid, "extra_groups": []}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C", HOME=str(self.socket_dir))
        done = subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            cwd=self.socket_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **options,
        )
        if check and done.returncode != 0:
            log = self.socket_dir / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stdout}{done.stderr}{tail}")
        return done

    def _ctl(self, action: str, *options: str, check: bool = True) -> None:
        # -l always: a server started without a log file keeps our stdout pipe open for ever.
        data = str(self.data_dir)
        self._run("pg_ctl", "-D", data, "-l", "server.log", "-w", "-t", "60", *options, action, check=check)

    def start(self) -> Cluster:
        """Create the cluster and start the server; returns self."""
        if os.geteuid() == 0:
            self._account = _service_user()
        # /tmp rather than $TMPDIR: the service account must be able to reach the directory, and a
        # unix socket path must stay under ~100 bytes.
        base = "/tmp" if os.path.isdir("/tmp") else None
        self.root = Path(tempfile.mkdtemp(prefix="toolstitch-pg-", dir=base))
        if self._account is not None:
            os.chown(self.root, self._account.pw_uid, self._account.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data_dir),
            "-U",
            SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        self._options = " ".join(
            [
                "-c listen_addresses=''",
                f"-k {self.socket_dir}",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
                "-c shared_buffers=32MB",
            ]
        )
        self._ctl("start", "-o", self._options)
        return self

    def restart(self) -> None:
        """``pg_ctl restart``: every open connection is cut; clients must reconnect."""
        self._ctl("restart", "-m", "fast")

    def stop_server(self) -> None:
        """Stop the server, keeping the data (``start_server`` brings it back)."""
        self._ctl("stop", "-m", "fast")

    def start_server(self) -> None:
        """Start the stopped server again (same socket, same settings)."""
        self._ctl("start", "-o", self._options)

    def stop(self) -> None:
        """Stop the server and delete everything."""
        if self.root is None:
            return
        with contextlib.suppress(Exception):
            self._ctl("stop", "-m", "immediate", check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def create_database(self, name: str) -> str:
        """Create database ``name`` (an identifier made of letters, digits and ``_``); its conninfo."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ValueError(f"not a plain database name: {name!r}")
        import psycopg

        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE template0")
        return self.conninfo(name)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
