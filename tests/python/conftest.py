"""Fixtures shared by the SPMD suites that run under orbite-run (every rank runs the same tests in
the same order; every wait is bounded, and pytest-timeout ends a test whose peer failed alone)."""

import pytest

import orbite

WAIT = 60  # seconds, every wait of these tests


@pytest.fixture(scope="session")
def comm():
    c = orbite.Communicator()
    assert c.size == 2, "these tests run on 2 ranks"
    return c


def peer_of(comm):
    return 1 - comm.rank
