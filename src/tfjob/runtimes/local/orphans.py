"""Keep replica processes from outliving tfjob (Linux prctl, via ctypes).

A kubelet ties a container's processes to the container; locally the only owner is the
tfjob process, so each replica gets PR_SET_PDEATHSIG=SIGKILL: the kernel kills it the
moment tfjob dies, even by SIGKILL, when no Python code can run. That signal covers the
direct child only; its own children (grandchildren) are covered by the watchdog, which
kills whole process groups (see `watchdog.py`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1

# Loaded once in the parent: a forked child must not dlopen (it may hold locks).
_libc: ctypes.CDLL | None = None
if sys.platform == "linux":
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` that makes the child get SIGKILL when this process dies.

    The kernel fires the signal when the *thread* that forked exits, so the caller must
    spawn from a long-lived thread (the event loop's). If the parent already died
    between fork and prctl, the child kills itself at once.
    """
    parent = os.getpid()

    def preexec() -> None:
        if _libc is not None:
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec
