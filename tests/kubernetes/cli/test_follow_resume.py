"""How a followed log resumes: after a broken stream and after a restart in place.

Neither can be produced on the test cluster: kwok keeps a followed log open for good
and never restarts a container in place, and the test kubelet serves no logs. So this
test scripts the API server's answers, as a kubelet gives them (a log opened again
with `sinceTime` repeats the lines of that second; a restarted container's log holds
only its own lines), and checks what the user would see: every line exactly once, in
order, including lines that share a timestamp.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from tfjob.api.kinds import KindDeclaration
from tfjob.core.plan import Event
from tfjob.core.progress import ReplicaView
from tfjob.frameworks.tensorflow import TENSORFLOW
from tfjob.interfaces.cluster_client.follow import FollowOptions, JobFollower
from tfjob.interfaces.cluster_client.jobs_api import LogLine
from tfjob.runtimes.kubernetes.transport.client import TransportError

_T = "2026-12-01T06:00:"


def _pod(state: str, restarts: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "j-worker-0",
            "uid": "u1",
            "ownerReferences": [{"kind": "TFJob", "name": "j", "uid": "job-uid"}],
            "labels": {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "0",
            },
        },
        "status": {
            "phase": phase,
            "containerStatuses": [
                {"name": "tensorflow", "restartCount": restarts, "state": {state: {}}}
            ],
        },
    }


def _job(condition: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "uid": "job-uid"},
        "status": {"conditions": [{"type": condition, "status": "True"}]},
    }


class _ScriptedApi:
    """The answers of an API server whose kubelet behaves as described above."""

    namespace = "ns"

    def __init__(self) -> None:
        self.state = "first"
        self.log_calls: list[tuple[bool, str | None]] = []
        self.looks_while_stopped = 0

    async def get(self, kind: KindDeclaration, name: str) -> dict[str, Any]:
        return _job("Succeeded" if self.state == "done" else "Running")

    async def pods(
        self, kind: KindDeclaration | None = None, name: str | None = None
    ) -> list[dict[str, Any]]:
        if self.state == "stopped":  # between the exit and the restart in place
            self.looks_while_stopped += 1
            if self.looks_while_stopped > 2:
                self.state = "restarted"
            return [_pod("terminated", 0)]
        if self.state == "restarted":
            return [_pod("running", 1)]
        if self.state == "done":
            return [_pod("terminated", 1, phase="Succeeded")]
        return [_pod("running", 0)]

    async def events(self, kind: KindDeclaration, name: str) -> list[dict[str, Any]]:
        return []

    async def log(
        self,
        pod: str,
        container: str,
        *,
        follow: bool = False,
        since_seconds: int | None = None,
        since_time: str | None = None,
    ) -> AsyncGenerator[LogLine, None]:
        self.log_calls.append((follow, since_time))
        call = len(self.log_calls)
        if call == 1:  # two lines with one timestamp, then the connection breaks
            yield LogLine(_T + "10.5Z", "a")
            yield LogLine(_T + "10.5Z", "b")
            raise TransportError("connection reset")
        if call == 2:  # opened again from second 10: a and b again, then new lines
            for stamp, text in (("10.5", "a"), ("10.5", "b"), ("10.5", "c"), ("11.2", "d")):
                yield LogLine(f"{_T}{stamp}Z", text)
            self.state = "stopped"  # the container exits: the stream ends
            return
        if call == 3:  # the restarted container's own log
            yield LogLine(_T + "12.000000001Z", "e")
            self.state = "done"
            return
        # the job ended: the last read, from second 12, repeats e
        yield LogLine(_T + "12.000000001Z", "e")


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log_line(self, replica: str, line: str) -> None:
        self.lines.append(f"[{replica}] {line}")

    def event(self, event: Event) -> None:
        pass

    def progress(self, state: str, replicas: list[ReplicaView]) -> None:
        pass


async def test_a_resumed_or_restarted_log_shows_every_line_once() -> None:
    api = _ScriptedApi()
    seen = _Lines()
    follower = JobFollower(api, TENSORFLOW, "j", seen, FollowOptions(interval=0.01))  # type: ignore[arg-type]
    final = await follower.follow()
    assert final["status"]["conditions"][0]["type"] == "Succeeded"
    assert seen.lines == [f"[worker-0] {x}" for x in "abcde"]
    assert api.log_calls == [
        (True, None),
        (True, _T + "10Z"),  # resumed at the second of the last line shown
        (True, _T + "11Z"),  # the restarted container
        (False, _T + "12Z"),  # what is left once the pod finished
    ]
