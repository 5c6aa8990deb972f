"""Shared pytest set-up for every suite.

Two things live here:

- The repository root goes on ``sys.path`` so test helpers import as
  ``testkit...`` whether pytest is started as ``pytest`` or ``python -m pytest``
  and whatever the import mode.
- Markers by fixture use: a test is marked ``controlplane`` exactly when it uses,
  directly or through other fixtures, the ``control_plane`` fixture (it starts a real
  kube-apiserver and etcd); ``tensorflow`` when it needs a ``python3`` that imports
  tensorflow, ``pytorch`` when it needs one that imports torch (``jax``, ``xgboost``,
  ``paddle`` likewise; ``mpi`` when it needs Open MPI's mpirun and mpi4py); ``image`` when it builds the container image; ``kueue`` when it runs
  Kueue's manager (tests/kubernetes/kueue); ``trainjob`` when it runs JobSet's
  manager (and Kubeflow Trainer's: tests/kubernetes/trainjob). So
  ``-m "not controlplane"`` runs every test that needs no API server, wherever its
  file sits, and ``-m controlplane`` every test that starts one.

Under pytest-xdist (scripts/test.sh runs three workers, ``--dist loadgroup``) each
test is grouped by its file, so a module-scoped fixture (Kueue's manager) starts on
one worker only, and every test of the real node (tests/node) is one group: the node
takes fixed addresses in its network namespace, so there is never more than one,
and the tests that build the operator's image (one tag) run beside it. The tests
that read the monitoring scenario (a Prometheus scraping an operator while jobs run:
tests/kubernetes/monitoring) are one group too, so the scenario runs once.

Suite-specific fixtures belong in the suite's own conftest (e.g.
tests/kubernetes/conftest.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

# Every Go program the tests start (kube-apiserver, etcd, the controllers, kwok, Kueue,
# the node's parts, kubectl) collects garbage at 400 % heap growth instead of 100 %: the
# API servers spent ~15 % of their CPU marking, the largest consumer of the suite's two
# cores, and a test cluster has memory to spare (docs/decisions/0027). A GOGC already
# set is kept.
os.environ.setdefault("GOGC", "400")

# lightkube decodes one thing at a time in every test process: the Kueue lanes use it
# from several threads, and msgspec crashed a worker when two built one class's
# decoder at once (testkit/lightkube_threads.py).
from testkit.lightkube_threads import decode_one_at_a_time  # noqa: E402

decode_one_at_a_time()

# fixture name -> marker; ``item.fixturenames`` holds the transitive closure, so a
# test that asks for ``jobs`` (which asks for ``kube`` ... ``control_plane``) counts.
MARKER_BY_FIXTURE = {
    "control_plane": "controlplane",
    "tensorflow_check": "tensorflow",
    "pytorch_check": "pytorch",
    "jax_check": "jax",
    "xgboost_check": "xgboost",
    "paddle_check": "paddle",
    "mpi_check": "mpi",
    "image": "image",
    "kueue": "kueue",
    "jobset": "trainjob",
}


def pytest_configure(config: pytest.Config) -> None:
    """``TFJOB_TEST_CPU=<file.json>``: each test's CPU, its processes' included
    (testkit/cpu_ledger.py), written per worker beside that file."""
    ledger = os.environ.get("TFJOB_TEST_CPU")
    if ledger:
        from testkit.cpu_ledger import CpuLedger

        config.pluginmanager.register(CpuLedger(Path(ledger)), "tfjob-cpu-ledger")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it uses (see the module docstring); first, so
    that xdist's own hook finds each test's group."""
    # pytest-xdist hands the groups out by their number of tests, most first (its
    # --loadscope-reorder, on by default): the unit-test files go out first, the node's
    # group (13 tests, the longest) once a worker is free. Longest first measured no
    # faster with three workers (docs/decisions/0027).
    groups = {item.nodeid: _group_of(item) for item in items}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in MARKER_BY_FIXTURE.items():
            if fixture in used:
                item.add_marker(getattr(pytest.mark, marker))


def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """Under `--dist loadgroup`, stop the run if a worker's collection has no test in a
    group: xdist puts an item in its group by appending `@<group>` to its id, and a
    pytest whose node ids ignore that (pytest 9.2 with pytest-xdist 3.8,
    pytest-xdist#1386) would spread every group over both workers in silence: each
    file's module fixtures started twice, two real nodes on one set of addresses."""
    if node.config.getoption("dist") != "loadgroup":
        return
    if ids and not any("@" in nodeid for nodeid in ids):
        pytest.exit(
            "pytest-xdist's --dist loadgroup grouped no test under pytest "
            f"{pytest.__version__}: install the versions pyproject.toml pins "
            "(scripts/test.sh does)",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


def _group_of(item: pytest.Item) -> str:
    """The xdist group: the real node's tests and those building the operator's image
    (scripts/image.sh, one tag) together, the monitoring scenario's together, every
    other file its own."""
    path = Path(str(item.path))
    if path.parent.name == "node" or "image" in getattr(item, "fixturenames", ()):
        return "node"
    if "scenario" in getattr(item, "fixturenames", ()):
        return "monitoring"  # its session fixture is ~30 s of jobs: run it on one worker
    return str(path)
