"""A PostgreSQL cluster of a benchmark's own, to crash: `initdb` and `pg_ctl` in a temp dir, on a free port.

The fault run restarts it with `pg_ctl restart -m immediate`, which is a crash for the server
(no checkpoint, in-flight transactions lost, recovery from the WAL on start), so it must never be
the shared server other work uses. PostgreSQL refuses to run as root: as root, every command runs
as the `postgres` user (`runuser`), which owns the directory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from temporal_recall._devserver import free_port

__all__ = ('Cluster', 'find_bin', 'own_cluster')

START_SECONDS = 60


def find_bin() -> Path:
    """The newest `/usr/lib/postgresql/*/bin` holding `initdb` and `pg_ctl` (Debian's layout), else PATH's."""
    found = sorted(
        glob.glob('/usr/lib/postgresql/*/bin/initdb'), key=lambda path: int(Path(path).parts[-3].split('.')[0])
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which('initdb')
    if on_path:
        return Path(on_path).parent
    raise SystemExit(
        'bench_fleet --faults needs PostgreSQL server binaries (initdb, pg_ctl): none in /usr/lib/postgresql/*/bin '
        'or on PATH. Install the server package (e.g. `apt-get install postgresql`).'
    )


@dataclass(frozen=True)
class Cluster:
    bin: Path
    data: Path
    port: int
    log: Path
    as_postgres: bool

    @property
    def url(self) -> str:
        return f'postgresql://postgres@127.0.0.1:{self.port}/postgres'

    def run(self, *command: str) -> None:
        argv = [str(self.bin / command[0]), *command[1:]]
        if self.as_postgres:
            argv = ['runuser', '-u', 'postgres', '--', *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=START_SECONDS + 30, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f'{" ".join(command[:2])} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}\n'
                f'server log: {self.log}'
            )

    def restart_immediate(self) -> None:
        """A crash and a restart: `pg_ctl restart -m immediate` (recovery from the WAL), waiting until it accepts."""
        # `-l` again: without it the new server would log to (and hold open) this process's pipe.
        self.run(
            'pg_ctl',
            '-D',
            str(self.data),
            '-l',
            str(self.log),
            '-m',
            'immediate',
            '-w',
            '-t',
            str(START_SECONDS),
            'restart',
        )


@contextlib.contextmanager
def own_cluster() -> Generator[Cluster]:
    """A new cluster (trust authentication, loopback only), started for the block and stopped after it."""
    as_postgres = os.geteuid() == 0
    with tempfile.TemporaryDirectory(prefix='bench-pg-') as tmp:
        root = Path(tmp)
        if as_postgres:
            user = pwd.getpwnam('postgres')
            os.chown(root, user.pw_uid, user.pw_gid)
        cluster = Cluster(find_bin(), root / 'data', free_port(), root / 'server.log', as_postgres)
        cluster.run('initdb', '-D', str(cluster.data), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync')
        options = f'-p {cluster.port} -c listen_addresses=127.0.0.1 -k {root} -c fsync=on'
        cluster.run('pg_ctl', '-D', str(cluster.data), '-l', str(cluster.log), '-o', options, '-w', 'start')
        try:
            yield cluster
        finally:
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                cluster.run('pg_ctl', '-D', str(cluster.data), '-m', 'fast', '-w', 'stop')
