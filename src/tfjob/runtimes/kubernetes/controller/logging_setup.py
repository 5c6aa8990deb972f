"""Structured logs on stderr, as text for people or one JSON object per line for
log collectors, with per-reconcile context.

Workers bind the job key into structlog's context variables, and every task has its
own copy of them, so each log line of a reconcile names its job without passing a
logger around. The format defaults to text on a terminal (someone is reading) and to
JSON otherwise (a container's output goes to a collector).

structlog is first imported here, once the format is known: its `dev` module imports
rich when it can (~0.1 s of CPU, before the operator's first request) for the console
renderer's tracebacks, and colorama (with ctypes) for its colours, which JSON lines
never use, so for JSON it is imported with them out of its sight (`_import_structlog`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

FORMATS = ("text", "json")


def default_format() -> str:
    return "text" if sys.stderr.isatty() else "json"


def configure(level: str = "info", fmt: str | None = None) -> None:
    fmt = fmt or default_format()
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    _import_structlog(fmt)
    import structlog

    renderer: Any = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *([structlog.processors.format_exc_info] if fmt == "json" else []),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping()[level.upper()]
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )


#: What structlog's console renderer imports when it can, and JSON lines never use.
_CONSOLE_ONLY = ("rich", "colorama", "better_exceptions")


def _import_structlog(fmt: str) -> None:
    """Import structlog for `fmt`: for JSON without rich, colorama (and ctypes with
    it) or better_exceptions (see the module docstring); a no-op once structlog or
    one of them is imported (the CLI's other commands use rich)."""
    if fmt != "json" or any(m in sys.modules for m in ("structlog", *_CONSOLE_ONLY)):
        return
    for module in _CONSOLE_ONLY:
        sys.modules[module] = None  # type: ignore[assignment]  # its import fails in there
    try:
        import structlog  # noqa: F401
    finally:
        for module in _CONSOLE_ONLY:
            del sys.modules[module]
