"""Many runs of the real `tfjob` command, each its own process, for a fraction of the CPU.

A test that gives `tfjob` a hundred files (the malformed corpus) paid a hundred
interpreter starts and imports of the CLI: about 0.25 CPU-s each, most of the test's
cost on a 2-core machine. ``ForkedCli`` starts one Python that imports the CLI once and
forks a child per run (after a warm-up the caller gives: the modules and caches
the runs would each build first): the child is a process of its own that runs `tfjob ARGS` from
its entry point (``main()``, its exit code, its stdout and stderr, the processes it
starts), as `python3 -c "...main()"` would after the imports. Only the interpreter's
start and the imports are shared, so a run's environment and folder are the test's
when the server starts (each run may name its own folder).

``spawn`` starts a command that runs until stopped (the tests' operators,
testkit/operators.py) and hands back a ``ForkedProcess``, used as a
``subprocess.Popen``: pid, signals, ``poll``, ``wait`` and the exit code, which the
server, its parent, reads when it reaps it.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any

_SERVER = r"""
import json, os, selectors, signal, sys, traceback
from tfjob.interfaces.cli import main

exec(sys.argv[1])  # the caller's warm-up: what every run would import or build first

def child(request):
    if request["timeout"]:
        signal.alarm(request["timeout"])  # SIGALRM ends a run that overstays
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if request.get("log"):  # one file for both, appended to (a long-running command)
        target = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(target, 1)
        os.dup2(target, 2)
        os.close(target)
    for fd, path in ((1, request.get("out")), (2, request.get("err"))):
        if path is None:
            continue
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    os.close(stdin)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    sys.argv = ["tfjob", *request["argv"]]
    code = 0
    try:
        main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int) and stop.code is not None:
            print(stop.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

# One thread: a child's end is read from its pidfd, so nothing else runs at a fork.
selector = selectors.DefaultSelector()
selector.register(0, selectors.EVENT_READ, None)
reading, children, pending = True, 0, b""
while reading or children:
    for key, _ in selector.select():
        if key.data is None:
            chunk = os.read(0, 65536)
            if not chunk:
                selector.unregister(0)
                reading = False
                continue
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    child(request)
                sys.stdout.write(json.dumps({"id": request["id"], "pid": pid}) + "\n")
                sys.stdout.flush()
                pidfd = os.pidfd_open(pid)
                selector.register(pidfd, selectors.EVENT_READ, (request["id"], pid))
                children += 1
        else:
            ident, pid = key.data
            selector.unregister(key.fd)
            os.close(key.fd)
            _, status = os.waitpid(pid, 0)
            children -= 1
            sys.stdout.write(json.dumps({"id": ident, "code": os.waitstatus_to_exitcode(status)}))
            sys.stdout.write("\n")
            sys.stdout.flush()
"""


class ForkedProcess:
    """A long-running `tfjob ARGS` forked by a ForkedCli (``spawn``), handled as a
    ``subprocess.Popen``: its pid, signals, ``poll``, ``wait`` and exit code (negative:
    the signal that ended it). Its parent is the forking server, which reaps it and
    reports the code."""

    def __init__(self, args: list[str], pid: int, ended: Future[int]) -> None:
        self.args = args
        self.pid = pid
        self._ended = ended
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self._ended.done():
            self.returncode = self._ended.result()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        try:
            self.returncode = self._ended.result(timeout)
        except TimeoutError as late:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0) from late
        return self.returncode

    def send_signal(self, sig: int) -> None:
        # Once reaped, the pid may be another process's: signal only while no exit
        # code has come back (the server reports it right after reaping).
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkedCli:
    """`tfjob ARGS` in forked children of one server process; ``run`` and ``spawn``
    are thread-safe."""

    def __init__(self, warm_up: str = "") -> None:
        """``warm_up``: Python the server runs once before any fork (imports, caches a
        run would build first), so that no child pays for it."""
        self._folder = Path(tempfile.mkdtemp(prefix="tfjob-forked-"))
        self._server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, warm_up],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._lock = threading.Lock()
        self._waiting: dict[int, tuple[Future[subprocess.CompletedProcess[str]], Any]] = {}
        self._started: dict[int, Future[int]] = {}  # a spawned command's pid
        self._ending: dict[int, Future[int]] = {}  # its exit code
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def submit(
        self,
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        timeout: int = 0,
    ) -> Future[subprocess.CompletedProcess[str]]:
        """Start `tfjob ARGS` in ``cwd`` (the test's folder if None) with ``env`` (the
        test's environment now if None), killed by SIGALRM (exit -14) after
        ``timeout`` seconds (0: never); the future holds its exit code and output."""
        future: Future[subprocess.CompletedProcess[str]] = Future()
        with self._lock:
            ident, self._next = self._next, self._next + 1
            out, err = self._folder / f"{ident}.out", self._folder / f"{ident}.err"
            self._waiting[ident] = (future, (list(args), out, err))
            self._send(ident, args, cwd, env, timeout=timeout, out=str(out), err=str(err))
        return future

    def spawn(
        self, *args: str, log: Path, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> ForkedProcess:
        """Start `tfjob ARGS` (an operator: it runs until stopped) with its stdout and
        stderr appended to ``log``, in ``cwd`` with ``env`` as for ``submit``."""
        started: Future[int] = Future()
        ended: Future[int] = Future()
        with self._lock:
            ident, self._next = self._next, self._next + 1
            self._started[ident], self._ending[ident] = started, ended
            self._send(ident, args, cwd, env, timeout=0, log=str(log))
        return ForkedProcess(["tfjob", *args], started.result(timeout=60), ended)

    def _send(
        self,
        ident: int,
        args: tuple[str, ...],
        cwd: Path | None,
        env: dict[str, str] | None,
        **request: Any,
    ) -> None:
        """One request to the server; the caller holds the lock."""
        request |= {
            "id": ident,
            "argv": list(args),
            "cwd": str(cwd or Path.cwd()),
            "env": dict(os.environ if env is None else env),
        }
        assert self._server.stdin is not None
        self._server.stdin.write(json.dumps(request))
        self._server.stdin.write("\n")
        self._server.stdin.flush()

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: int = 60
    ) -> subprocess.CompletedProcess[str]:
        """`tfjob ARGS` to its end, as ``subprocess.run`` with its output captured."""
        done = self.submit(*args, env=env, timeout=timeout).result()
        if done.returncode == -signal.SIGALRM:
            raise subprocess.TimeoutExpired(done.args, timeout, done.stdout, done.stderr)
        return done

    def _read(self) -> None:
        assert self._server.stdout is not None
        for line in self._server.stdout:
            message = json.loads(line)
            ident = message["id"]
            with self._lock:
                if "pid" in message:
                    if ident in self._started:
                        self._started.pop(ident).set_result(message["pid"])
                    continue
                if ident in self._ending:
                    self._ending.pop(ident).set_result(message["code"])
                    continue
                future, (argv, out, err) = self._waiting.pop(ident)
            future.set_result(
                subprocess.CompletedProcess(
                    ["tfjob", *argv], message["code"], out.read_text(), err.read_text()
                )
            )
        gone = RuntimeError("the forking server ended")
        with self._lock:
            for future, _ in self._waiting.values():
                future.set_exception(gone)
            for waiting in (*self._started.values(), *self._ending.values()):
                waiting.set_exception(gone)
            self._waiting.clear()
            self._started.clear()
            self._ending.clear()

    def close(self) -> None:
        if self._server.stdin is not None:
            self._server.stdin.close()
        try:
            self._server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait()
        self._reader.join(timeout=5)
        for path in self._folder.iterdir():
            path.unlink()
        self._folder.rmdir()

    def __enter__(self) -> ForkedCli:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


#: The servers `shared` hands out, by network namespace and warm-up.
_SHARED: dict[tuple[int, str], ForkedCli] = {}
_SHARED_LOCK = threading.Lock()


def shared(warm_up: str) -> ForkedCli:
    """This process's server for ``warm_up`` in the calling thread's network namespace
    (a child is in its server's, and the real node's tests run commands inside the
    node's: testkit/node.py), started on first use and closed at exit."""
    key = (os.stat("/proc/thread-self/ns/net").st_ino, warm_up)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = ForkedCli(warm_up)
            atexit.register(_SHARED[key].close)
        return _SHARED[key]
