"""Fixtures for the PostgreSQL ledger tests: one throwaway cluster per session, a database per test.

The cluster (:mod:`tests.pg_cluster`) starts on first use, so a run that selects no PostgreSQL test
never starts it. Without PostgreSQL binaries on the machine those tests skip, saying so; ``.ci/run``
installs them, so CI always runs them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.pg_cluster import Cluster, find_bindir

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A PostgreSQL server on a unix socket in a temporary directory, for the whole session."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql)")
    with Cluster(bindir) as cluster:
        yield cluster


@pytest.fixture
def pg_conninfo(pg_cluster: Cluster) -> str:
    """The connection string of a fresh, empty database (one per test: nothing leaks between tests)."""
    return pg_cluster.create_database(f"ledger_{next(_databases)}")
