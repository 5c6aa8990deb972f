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
"""

from __future__ import annotations

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
    for fd, path in ((1, request["out"]), (2, request["err"])):
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


class ForkedCli:
    """`tfjob ARGS` in forked children of one server process; ``run`` is thread-safe."""

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
            request = {
                "id": ident,
                "argv": list(args),
                "cwd": str(cwd or Path.cwd()),
                "env": dict(os.environ if env is None else env),
                "timeout": timeout,
            }
            assert self._server.stdin is not None
            self._server.stdin.write(json.dumps({**request, "out": str(out), "err": str(err)}))
            self._server.stdin.write("\n")
            self._server.stdin.flush()
        return future

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
            with self._lock:
                future, (argv, out, err) = self._waiting.pop(message["id"])
            future.set_result(
                subprocess.CompletedProcess(
                    ["tfjob", *argv], message["code"], out.read_text(), err.read_text()
                )
            )
        with self._lock:
            for future, _ in self._waiting.values():
                future.set_exception(RuntimeError("the forking server ended"))
            self._waiting.clear()

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
