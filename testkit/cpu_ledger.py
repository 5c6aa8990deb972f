"""Where the suite's CPU goes: each test's CPU seconds, its processes' included.

Opt-in (``TFJOB_TEST_CPU=<file.json>``, tests/conftest.py registers it): the suite's
time on 2 cores is bounded by the CPU its tests burn (the control planes, operators,
training processes and CLI runs they start), and a test's duration does not show that
cost: a test that waits 20 s may burn 1 CPU-s, one that trains for 20 s burns 40. For
every test (setup, call and teardown together) the ledger adds up the CPU of the
pytest worker, of each process alive under it (its threads, and what it reaped) and of
every child the worker reaped meanwhile; a process left behind under init is lost. At
the end each worker writes ``<file>.<worker>.json``: test id -> [CPU s, wall s].
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as file:
                found.extend(int(child) for child in file.read().split())
        except OSError:
            continue
    return found


def _process_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of one process, in seconds; 0 once gone."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / _TICK


def _descendants(root: int) -> Iterator[int]:
    pending = _children(root)
    while pending:
        pid = pending.pop()
        yield pid
        pending.extend(_children(pid))


def tree_cpu() -> float:
    """This process's CPU, its reaped children's, and each live descendant's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    return total + sum(_process_cpu(pid) for pid in _descendants(os.getpid()))


class CpuLedger:
    """A pytest plugin: a test's CPU, from its setup's start to its teardown's end."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._entries: dict[str, list[float]] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        cpu, wall = tree_cpu(), time.monotonic()
        try:
            return (yield)
        finally:
            spent = [round(tree_cpu() - cpu, 2), round(time.monotonic() - wall, 2)]
            self._entries[item.nodeid] = spent

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        target = self._path.with_name(f"{self._path.stem}.{worker}.json")
        target.write_text(json.dumps(self._entries, indent=0, sort_keys=True))
