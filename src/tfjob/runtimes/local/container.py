"""One container of a local pod: a process group, restarted in place like a kubelet does.

The pod's `restartPolicy` decides what happens when the process exits: `Never` leaves
it terminated, `OnFailure` starts it again after a non-zero exit, `Always` after any
exit, each time after a back-off that doubles from 0.5 s up to 10 s (reset after ten
minutes of running, as the kubelet does). These are in-place restarts: the pod stays,
`restartCount` goes up. Replacing a pod is never decided here; that is the core's job.

Each process starts in a new session (its own process group), gets
PR_SET_PDEATHSIG=SIGKILL, and is registered with the watchdog, so nothing it starts
outlives tfjob. When its main process exits, whatever is left of its group is killed,
as tearing down a container's PID namespace would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime

from tfjob.api.observed import ContainerState, ContainerStatus, Terminated, Waiting
from tfjob.runtimes.local.launch import Launch, LaunchError
from tfjob.runtimes.local.orphans import die_with_parent
from tfjob.runtimes.local.output import ContainerLog
from tfjob.runtimes.local.watchdog import Watchdog

FIRST_BACKOFF = 0.5
MAX_BACKOFF = 10.0
BACKOFF_RESET_AFTER = 600.0
_DRAIN_TIMEOUT = 2.0  # output still buffered after the group is killed
_EXIT_NOT_FOUND = 127
_EXIT_NOT_EXECUTABLE = 126


class LocalContainer:
    """Runs and supervises one container's process."""

    def __init__(
        self,
        name: str,
        launch: Launch | LaunchError,
        restart_policy: str,
        log: ContainerLog,
        watchdog: Watchdog | None,
        on_change: Callable[[], None],
    ) -> None:
        self.name = name
        self.restart_count = 0
        self.started_at: datetime | None = None
        self._launch = launch
        self._policy = restart_policy
        self._log = log
        self._watchdog = watchdog
        self._on_change = on_change
        self._process: _Process | None = None
        self._state = ContainerState(waiting=Waiting(reason="ContainerCreating"))
        self._stopping = asyncio.Event()
        self._signal: int | None = None
        self._backoff = FIRST_BACKOFF
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin supervising; returns at once."""
        self._task = asyncio.create_task(self._supervise(), name=f"container {self.name}")

    @property
    def started(self) -> bool:
        return self.started_at is not None

    @property
    def active(self) -> bool:
        """Running, or about to be restarted in place."""
        return self._task is not None and not self._task.done()

    @property
    def exit_code(self) -> int | None:
        terminated = self._state.terminated
        return None if terminated is None or self.active else terminated.exit_code

    def status(self) -> ContainerStatus:
        return ContainerStatus(name=self.name, restart_count=self.restart_count, state=self._state)

    def send(self, signum: int) -> None:
        """Signal the whole process group, and stop restarting it."""
        self._signal = signum
        self._stopping.set()
        if self._process is not None and self._process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signum)

    async def wait(self) -> None:
        if self._task is not None:
            await asyncio.shield(self._task)

    def close_log(self) -> None:
        self._log.close()

    async def _supervise(self) -> None:
        while True:
            ran_for = await self._run_once()
            if self._stopping.is_set() or not self._restarts(self._state):
                return
            if ran_for >= BACKOFF_RESET_AFTER:
                self._backoff = FIRST_BACKOFF
            delay, self._backoff = self._backoff, min(self._backoff * 2, MAX_BACKOFF)
            self._set_state(ContainerState(waiting=Waiting(reason="CrashLoopBackOff")))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()
                return
            self.restart_count += 1
            self._log.marker(f"container {self.name} restarted in place ({self.restart_count})")

    def _restarts(self, state: ContainerState) -> bool:
        code = state.terminated.exit_code if state.terminated else 0
        return self._policy == "Always" or (self._policy == "OnFailure" and code != 0)

    async def _run_once(self) -> float:
        """Start the process and wait for it; returns how long it ran (seconds)."""
        begin = time.monotonic()
        try:
            process = await self._spawn()
        except (OSError, LaunchError) as error:
            self._set_state(_start_error(error))
            return 0.0
        self._process = process
        self.started_at = datetime.now(UTC)
        self._set_state(ContainerState())  # running
        if self._signal is not None:  # deleted while it was starting
            self.send(self._signal)
        code = await process.exited
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # leftovers of the group
        if self._watchdog is not None:
            self._watchdog.unregister(process.pid)
        await process.drained()
        self._set_state(_terminated(code))
        return time.monotonic() - begin

    async def _spawn(self) -> _Process:
        launch = self._launch
        if isinstance(launch, LaunchError):
            raise launch
        loop = asyncio.get_running_loop()
        _, process = await loop.subprocess_exec(
            lambda: _Process(loop, self._log),
            *launch.argv,
            executable=launch.executable,
            env=launch.env,
            cwd=launch.cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )
        if self._watchdog is not None:
            self._watchdog.register(process.pid)
        return process

    def _set_state(self, state: ContainerState) -> None:
        self._state = state
        self._on_change()


def _terminated(returncode: int) -> ContainerState:
    """Kubernetes' view of an exit: a signal N becomes exit code 128+N."""
    code = 128 - returncode if returncode < 0 else returncode
    reason = "Completed" if code == 0 else "Error"
    return ContainerState(terminated=Terminated(exit_code=code, reason=reason))


def _start_error(error: Exception) -> ContainerState:
    not_found = isinstance(error, (LaunchError, FileNotFoundError))
    code = _EXIT_NOT_FOUND if not_found else _EXIT_NOT_EXECUTABLE
    return ContainerState(
        terminated=Terminated(exit_code=code, reason="StartError", message=str(error))
    )


class _Process(asyncio.SubprocessProtocol):
    """One started process: its exit, and its output fed to the container's log.

    A protocol rather than `asyncio.subprocess.Process`, whose `wait()` (Python 3.11)
    returns only once every pipe is closed, which a grandchild holding stdout would
    delay; here the exit is known the moment the process ends.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, log: ContainerLog) -> None:
        self._log = log
        self._transport: asyncio.SubprocessTransport | None = None
        self.exited: asyncio.Future[int] = loop.create_future()
        self._closed: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self._transport = transport

    @property
    def pid(self) -> int:
        assert self._transport is not None
        return self._transport.get_pid()

    @property
    def returncode(self) -> int | None:
        return self.exited.result() if self.exited.done() else None

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self._log.feed(fd, data if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._log.end(fd)

    def process_exited(self) -> None:
        assert self._transport is not None
        code = self._transport.get_returncode()
        if not self.exited.done() and code is not None:
            self.exited.set_result(code)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._closed.done():
            self._closed.set_result(None)

    async def drained(self) -> None:
        """Let the output already written reach the log; give up on a pipe held elsewhere
        (a process that left the group with setsid)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_DRAIN_TIMEOUT):
                await asyncio.shield(self._closed)
        assert self._transport is not None
        self._transport.close()
