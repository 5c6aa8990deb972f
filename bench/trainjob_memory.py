"""What the operator holds per TrainJob: its caches, indexes, queue and holds, by tracemalloc.

The TrainJob race (`race_bench.py --kind trainjob`) measures the operator's peak RSS;
this bench says what the part of it that grows with the TrainJobs is made of. It feeds
the TrainJob controller's own parts (the informers of trainer_informers.py with their
codecs and indexes, TrainJobCaches, the handlers `Router.wire_trainjobs` installs, a
WorkQueue) the watch events a TrainJob of the race brings, in the race's order, with
the bookkeeping a pass does between them (its writes noted, its hold, the queue's get
and done), as JSON bytes the API server sent in a race (`trainjob_memory_objects.json`:
a TrainJob of tfjob's half and its JobSet, Complete; the earlier states are derived
from them; names, uids, versions of their own, timestamps at the race's pace):
1. the TrainJob created (no status); its first pass applies the JobSet (noted, held);
2. the JobSet ADDED (our apply's version: no pass), then its first status (counts all
   0: the handler queues the TrainJob for 300 s later, core/trainjob/status.py);
3. the JobSet Completed (a pass: the status write noted, held);
4. the TrainJob MODIFIED by that status write (our write: no pass).
No request is made and no reconciler runs: the bytes counted are those the caches and
the queue keep once every TrainJob is Complete and its JobSet's 300 s wait still
pending, as at the end of the race. The bytes of the imports and of empty caches are
left out (the first snapshot is taken after a warm-up of a few TrainJobs).

Run: PYTHONPATH=src:. python bench/trainjob_memory.py [--jobs 2000] [--top 15]
[--src ../before/src] (another tree's code: the figures of a commit before a change)
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import re
import sys
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

_SRC = Path(__file__).resolve().parents[1] / "src"
if "--src" in sys.argv:  # before the imports below: they are of that tree
    _SRC = Path(sys.argv[sys.argv.index("--src") + 1]).resolve()
sys.path.insert(0, str(_SRC))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tfjob.runtimes.kubernetes.cache.trainer_informers import TrainJobInformers  # noqa: E402 (after --src)
from tfjob.runtimes.kubernetes.cache.trainjobs import TrainJobCaches, TrainJobView  # noqa: E402 (after --src)
from tfjob.runtimes.kubernetes.cache.workqueue import WorkQueue  # noqa: E402 (after --src)
from tfjob.runtimes.kubernetes.controller.handlers import Router  # noqa: E402 (after --src)
from tfjob.runtimes.kubernetes.transport.resources import JOBSETS, TRAINJOBS  # noqa: E402 (after --src)

OBJECTS = Path(__file__).resolve().parent / "trainjob_memory_objects.json"
NAMESPACE = "race"
WARM_UP = 50


def _states(done: dict[str, Any], jobset_done: dict[str, Any]) -> list[tuple[str, Any]]:
    """The race's events of one TrainJob: (resource, document) in order."""
    created = copy.deepcopy(done)
    created.pop("status", None)
    created["metadata"]["managedFields"] = created["metadata"]["managedFields"][:1]
    made = copy.deepcopy(jobset_done)
    made.pop("status", None)
    made["metadata"]["managedFields"] = made["metadata"]["managedFields"][:1]
    first_counts = copy.deepcopy(jobset_done)
    first_counts["status"] = {
        "replicatedJobsStatus": [
            {**j, "succeeded": 0} for j in jobset_done["status"]["replicatedJobsStatus"]
        ],
        "restarts": 0,
    }
    return [
        ("trainjob", created),
        ("jobset", made),
        ("jobset", first_counts),
        ("jobset", jobset_done),
        ("trainjob", done),
    ]


def _named(document: Any, i: int, version: int) -> bytes:
    """The document of TrainJob `i` (its name, uids, versions of its own), as bytes."""
    text = json.dumps(document, separators=(",", ":"))
    text = text.replace('"t0"', f'"t{i}"').replace("-node-0-0.t0", f"-node-0-0.t{i}")
    for n, uid in enumerate(_UIDS):
        text = text.replace(uid, f"{i:08x}-0000-4000-8000-{n:012x}")
    # The race's pace: 400 TrainJobs made a second, 20 ending a second (their
    # timestamps, to the second, are shared by those: the decoders intern them).
    if document.get("kind") == "TrainJob":
        made = f'"creationTimestamp":"{_at(i // 400)}"'
        text = re.sub('"creationTimestamp":"[^"]*"', made, text)
    text = re.sub('"lastTransitionTime":"[^"]*"', f'"lastTransitionTime":"{_at(i // 20)}"', text)
    meta = document["metadata"]
    text = text.replace(
        f'"resourceVersion":"{meta["resourceVersion"]}"', f'"resourceVersion":"{version}"'
    )
    return text.encode()


_UIDS: list[str] = []
_START = datetime(2026, 1, 1, tzinfo=UTC)


def _at(seconds: int) -> str:
    return (_START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


async def feed(
    jobs: range,
    informers: TrainJobInformers,
    caches: TrainJobCaches,
    queue: WorkQueue,
    states: list[tuple[str, Any]],
    versions: list[int],
) -> None:
    """Each TrainJob's events and passes, as in the race (the module's docstring)."""
    trainjobs, jobsets = informers.trainjobs, informers.jobsets
    for i in jobs:
        key = f"{NAMESPACE}/t{i}"
        raw = [_named(doc, i, versions.pop()) for _what, doc in states]
        trainjobs._handle(_event("ADDED", raw[0]))
        await _pass(queue, caches, key, JOBSETS, _version(raw[1]))
        jobsets._handle(_event("ADDED", raw[1]))
        jobsets._handle(_event("MODIFIED", raw[2]))
        jobsets._handle(_event("MODIFIED", raw[3]))
        await _pass(queue, caches, key, TRAINJOBS, _version(raw[4]))
        trainjobs._handle(_event("MODIFIED", raw[4]))


def _event(kind: str, raw: bytes) -> bytes:
    return b'{"type":"%s","object":%s}' % (kind.encode(), raw)


def _version(raw: bytes) -> str:
    return str(json.loads(raw)["metadata"]["resourceVersion"])


async def _pass(
    queue: WorkQueue, caches: TrainJobCaches, key: str, resource: Any, version: str
) -> None:
    """A pass of `key` as the controller makes one: taken from the queue, its view,
    its write noted, held, done."""
    taken = await queue.get()
    assert taken == key, (taken, key)
    view = caches.view(key)
    assert isinstance(view, TrainJobView), view
    caches.first_pass(key, view.trainjob.metadata.uid)
    view.wrote(resource, version)
    caches.hold(view)
    queue.done(key)
    queue.forget(key)


async def measure(jobs: int, top: int) -> dict[str, Any]:
    documents = json.loads(OBJECTS.read_text())
    done, jobset_done = documents["trainjob"], documents["jobset"]
    _UIDS[:] = [done["metadata"]["uid"], jobset_done["metadata"]["uid"]]
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # the JobSet's 300 s wait
    jobset_done["metadata"]["creationTimestamp"] = now
    states = _states(done, jobset_done)
    informers = TrainJobInformers(None, namespace=NAMESPACE)  # type: ignore[arg-type]
    for informer in informers.informers():
        informer.synced.set()
    caches = TrainJobCaches(informers)
    queue = WorkQueue()
    router = Router(shared=None, queues={}, recorder=None)  # type: ignore[arg-type]
    router.wire_trainjobs(caches, queue)
    versions = list(range(10 * (jobs + WARM_UP) + 1000, 1000, -2))
    await feed(range(WARM_UP), informers, caches, queue, states, versions)
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    await feed(range(WARM_UP, WARM_UP + jobs), informers, caches, queue, states, versions)
    del versions
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert len(informers.trainjobs) == len(informers.jobsets) == WARM_UP + jobs
    stats = after.compare_to(before, "lineno")
    total = sum(s.size_diff for s in stats)
    print(f"{jobs} TrainJobs: {total / jobs:.0f} bytes per TrainJob held ({total / 2**20:.1f} MB)")
    lines = {}
    for stat in stats[:top]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        lines[where] = round(stat.size_diff / jobs)
        print(f"  {stat.size_diff / jobs:7.0f} B  {stat.count_diff / jobs:5.1f} blocks  {where}")
    return {
        "TrainJobs": jobs,
        "bytes per TrainJob": round(total / jobs),
        "top lines, bytes per TrainJob": lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--src", help="another tree's src/ (imported instead of this one's)")
    args = parser.parse_args()
    figures = asyncio.run(measure(args.jobs, args.top))
    if args.src:
        figures = {f"src {args.src}": figures}

    from results import record

    record("trainjob_memory", figures)


if __name__ == "__main__":
    main()
