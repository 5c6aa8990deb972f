"""lightkube from several threads of one test process, without crashing it.

The Kueue scenarios run one lane per kind in threads (testkit/lanes.py), each talking
to the API server through lightkube. lightkube decodes with msgspec, and msgspec
0.22 builds a Struct class's decoding information on its first use: two threads doing
that for one class at once crash the interpreter (a segmentation fault, which took a
whole pytest-xdist worker down mid-run; reproduced outside the suite in 2 of 100
processes whose six threads each decoded one Node). tfjob itself decodes on one
thread, its event loop's.

`decode_one_at_a_time()` puts every way lightkube decodes behind one lock: its
responses (`msgspec.json.decode`, which lightkube.core.decoders keeps as
`json_decode`), `from_dict` and kubeconfig files (`msgspec.convert`, looked up on the
module each call). Decoding holds the GIL anyway, so the lock costs the lanes nothing
they had.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

import msgspec
from lightkube.config import kubeconfig
from lightkube.core import decoders, dictmixin

F = TypeVar("F", bound=Callable[..., Any])

_LOCK = threading.RLock()


def _locked(function: F) -> F:
    @functools.wraps(function)
    def one_at_a_time(*args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return function(*args, **kwargs)

    one_at_a_time.__one_at_a_time__ = True  # type: ignore[attr-defined]
    return one_at_a_time  # type: ignore[return-value]


class _LockedMsgspec(ModuleType):
    """msgspec as lightkube's modules see it: `convert` behind the lock."""

    convert = staticmethod(_locked(msgspec.convert))

    def __getattr__(self, name: str) -> Any:
        return getattr(msgspec, name)


def decode_one_at_a_time() -> None:
    """Serialise lightkube's decoding in this process (idempotent)."""
    if getattr(decoders.json_decode, "__one_at_a_time__", False):
        return
    decoders.json_decode = _locked(decoders.json_decode)
    shim = _LockedMsgspec("msgspec")
    dictmixin.msgspec = shim  # type: ignore[attr-defined]
    kubeconfig.msgspec = shim  # type: ignore[attr-defined]
